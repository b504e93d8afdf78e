-- Named keys, idempotency and retention: the API key that owns a job (its name;
-- '' where the server has no keys), the Idempotency-Key it was created with and a hash of its
-- request, and how long it is kept once it ends.
ALTER TABLE jobs ADD COLUMN api_key TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN idempotency_key TEXT;
ALTER TABLE jobs ADD COLUMN request_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN retain BIGINT; -- nanoseconds after finished; NULL: kept forever
-- one job per (API key, Idempotency-Key): two replicas inserting the same pair make one
CREATE UNIQUE INDEX jobs_idempotency ON jobs (api_key, idempotency_key) WHERE idempotency_key IS NOT NULL;
-- a key's jobs in flight (its quota) and its own page of the job list
CREATE INDEX jobs_key_unfinished ON jobs (api_key) WHERE status IN ('queued', 'running');
CREATE INDEX jobs_key_created ON jobs (api_key, created DESC, id);
-- the sweep reads finished jobs in the order they expire
CREATE INDEX jobs_expiry ON jobs ((finished + retain)) WHERE retain IS NOT NULL AND finished IS NOT NULL;
-- the sweep's lease: one row, held by one replica at a time
CREATE TABLE sweeper (id INTEGER PRIMARY KEY CHECK (id = 1), holder TEXT NOT NULL, until TIMESTAMPTZ NOT NULL);
