-- Priorities, queue deadlines and webhooks (docs/api.md). The stored request is the record of
-- what was asked; the columns below are derived from it by the database, so the claim, the
-- deadline sweep and the webhook trigger read plain columns and no insert had to change.
-- Every statement stands alone (IF NOT EXISTS, OR REPLACE): the file applies whatever other
-- migrations came before it.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS priority INTEGER
  GENERATED ALWAYS AS (COALESCE((request->>'priority')::integer, 0)) STORED;
-- Unix nanoseconds, like created; NULL when the job has no queue_timeout
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS queue_deadline BIGINT
  GENERATED ALWAYS AS (created + ((request->>'queue_timeout')::double precision * 1e9)::bigint) STORED;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS webhook TEXT GENERATED ALWAYS AS (request->>'webhook') STORED;
-- the sweep reads only jobs that never started and have a deadline
CREATE INDEX IF NOT EXISTS jobs_queue_deadline ON jobs (queue_deadline)
  WHERE status IN ('queued', 'running') AND started IS NULL AND queue_deadline IS NOT NULL;

-- The webhook outbox: one row per job and event, written by the trigger below in the same
-- statement as the status change, so no event is lost whichever replica (or which statement:
-- a run's end, a claim, a cancel, the deadline sweep) changed the job. Any replica delivers a
-- due row under a lease, as it claims jobs; a killed deliverer's lease runs out and another
-- delivers it (at least once). Deleting a job drops its deliveries.
CREATE TABLE IF NOT EXISTS webhook_deliveries (
  id TEXT PRIMARY KEY,              -- job id ":" event, the Marspec-Webhook-Id header
  job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  event TEXT NOT NULL,              -- started, succeeded, failed, cancelled
  url TEXT NOT NULL,
  status TEXT NOT NULL,             -- the job as the event left it
  error TEXT NOT NULL DEFAULT '',
  started BIGINT,
  finished BIGINT,
  created BIGINT NOT NULL,          -- when the event happened (Unix nanoseconds)
  body TEXT,                        -- fixed at the first attempt: every retry sends the same bytes
  state TEXT NOT NULL DEFAULT 'pending', -- pending, delivered, failed (gave up)
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt BIGINT NOT NULL DEFAULT 0,
  owner TEXT,
  lease_until TIMESTAMPTZ,
  last_status INTEGER NOT NULL DEFAULT 0,
  last_error TEXT NOT NULL DEFAULT '',
  delivered BIGINT
);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (next_attempt) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS webhook_deliveries_job ON webhook_deliveries (job_id);

CREATE OR REPLACE FUNCTION jobs_webhook_outbox() RETURNS trigger AS $$
DECLARE
  wanted JSONB := NEW.request->'webhook_events'; -- NULL: every event
BEGIN
  IF OLD.started IS NULL AND NEW.started IS NOT NULL AND (wanted IS NULL OR wanted ? 'started') THEN
    INSERT INTO webhook_deliveries (id, job_id, event, url, status, started, created)
      VALUES (NEW.id || ':started', NEW.id, 'started', NEW.webhook, 'running', NEW.started, NEW.started)
      ON CONFLICT (id) DO NOTHING;
  END IF;
  IF OLD.status IN ('queued', 'running') AND NEW.status IN ('succeeded', 'failed', 'cancelled')
      AND (wanted IS NULL OR wanted ? NEW.status) THEN
    INSERT INTO webhook_deliveries (id, job_id, event, url, status, error, started, finished, created)
      VALUES (NEW.id || ':' || NEW.status, NEW.id, NEW.status, NEW.webhook, NEW.status, NEW.error, NEW.started, NEW.finished,
        COALESCE(NEW.finished, (extract(epoch FROM clock_timestamp()) * 1e9)::bigint))
      ON CONFLICT (id) DO NOTHING;
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

DROP TRIGGER IF EXISTS jobs_webhook_outbox ON jobs;
CREATE TRIGGER jobs_webhook_outbox AFTER UPDATE OF status, started ON jobs
  FOR EACH ROW WHEN (NEW.webhook IS NOT NULL) EXECUTE FUNCTION jobs_webhook_outbox();
