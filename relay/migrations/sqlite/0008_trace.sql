-- Tracing: the W3C traceparent of the ingest span that stored a call, so
-- that its delivery attempts, made later and perhaps by another relay,
-- are spans of the same trace. NULL while tracing is off; no index (it is
-- read only with the claimed row).
ALTER TABLE deliveries ADD COLUMN trace_parent TEXT;
