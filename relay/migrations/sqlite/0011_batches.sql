-- The batch a call waits in, when its destination packs several calls in
-- one POST: the rows of a batch share its id, and only one of them (the
-- batch's lead) keeps the batch's saved state and attempt log, which hold
-- the whole batch's body, instead of every row keeping a copy. The index
-- finds a batch's lead for the delivery log.
ALTER TABLE deliveries ADD COLUMN batch TEXT;
CREATE INDEX deliveries_batch ON deliveries (batch, id) WHERE batch IS NOT NULL;
