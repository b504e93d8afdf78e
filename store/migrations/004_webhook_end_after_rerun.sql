-- A job that ends again after the store check's repair put it back to the queue (an image's
-- bytes were lost, and the run made them again) tells its webhook of the new end. The first end
-- of each kind keeps the delivery id JOBID:EVENT; a later one is JOBID:EVENT:N, N counting that
-- job's ends of that kind, this one included: a new id, so receivers deduplicating by
-- Marspec-Webhook-Id do not take it for a retry of the first, and ON CONFLICT no longer drops it.
-- (The job's row is locked by the update that fires this, so two ends of one job do not race.)
CREATE OR REPLACE FUNCTION jobs_webhook_outbox() RETURNS trigger AS $$
DECLARE
  wanted JSONB := NEW.request->'webhook_events'; -- NULL: every event
  ends INTEGER;
BEGIN
  IF OLD.started IS NULL AND NEW.started IS NOT NULL AND (wanted IS NULL OR wanted ? 'started') THEN
    INSERT INTO webhook_deliveries (id, job_id, event, url, status, started, created)
      VALUES (NEW.id || ':started', NEW.id, 'started', NEW.webhook, 'running', NEW.started, NEW.started)
      ON CONFLICT (id) DO NOTHING;
  END IF;
  IF OLD.status IN ('queued', 'running') AND NEW.status IN ('succeeded', 'failed', 'cancelled')
      AND (wanted IS NULL OR wanted ? NEW.status) THEN
    SELECT count(*) INTO ends FROM webhook_deliveries WHERE job_id = NEW.id AND event = NEW.status;
    INSERT INTO webhook_deliveries (id, job_id, event, url, status, error, started, finished, created)
      VALUES (NEW.id || ':' || NEW.status || CASE WHEN ends > 0 THEN ':' || (ends + 1) ELSE '' END,
        NEW.id, NEW.status, NEW.webhook, NEW.status, NEW.error, NEW.started, NEW.finished,
        COALESCE(NEW.finished, (extract(epoch FROM clock_timestamp()) * 1e9)::bigint))
      ON CONFLICT (id) DO NOTHING;
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;
