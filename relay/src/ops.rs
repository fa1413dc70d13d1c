//! The relay's operations beyond ingest, shared by the admin API and the
//! CLI: delete notifications, audience syncs, replays, status.
