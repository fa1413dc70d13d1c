-- Every finished row has the time it finished, which is where its
-- retention starts: rows an older relay stored finished without one count
-- from their receipt, as they always did.
UPDATE deliveries SET finished_at = received_at WHERE status <> 0 AND finished_at IS NULL;
