-- Jobs and images as in the SQLite schema (times in Unix nanoseconds, so both stores return the
-- same values), plus what a shared queue needs: the owning replica, its lease, the attempt and
-- a cancel request that the owner acts on.
CREATE TABLE jobs (
  id TEXT PRIMARY KEY,
  created BIGINT NOT NULL,
  status TEXT NOT NULL,
  error TEXT NOT NULL DEFAULT '',
  started BIGINT,
  finished BIGINT,
  mode TEXT NOT NULL,
  classes INTEGER[] NOT NULL,
  request JSONB NOT NULL,
  settings JSONB NOT NULL,
  owner TEXT,
  lease_until TIMESTAMPTZ,
  attempt INTEGER NOT NULL DEFAULT 0,
  cancel_requested BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX jobs_created ON jobs (created DESC, id);
-- the claim query reads only unfinished jobs, oldest first
CREATE INDEX jobs_unfinished ON jobs (created, id) WHERE status IN ('queued', 'running');
CREATE TABLE images (
  id TEXT PRIMARY KEY,
  job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  class INTEGER NOT NULL,
  class_name TEXT NOT NULL,
  seconds DOUBLE PRECISION NOT NULL,
  stats JSONB,
  UNIQUE (job_id, idx)
);
