package store

import "time"

// Webhooks and queue deadlines: what a store adds for the hosted-service features of
// docs/api.md. Both SQLite and PostgreSQL implement Outbox; PostgreSQL also implements
// Deadlines (with SQLite the one process's scheduler holds every queued job and fails it).

// Outbox holds the webhook deliveries that status changes wrote, in the same statement, for
// jobs that asked for a webhook (a trigger in the database: a run's start and end, a claim,
// a cancel and the deadline sweep all write through it). A deliverer claims due rows under a
// lease, as replicas claim jobs; every write about a claimed delivery holds only while its
// DeliveryHold does, so a deliverer whose lease ran out (it was killed, or stalled) changes
// nothing, and the row is delivered again by whoever claims it next: at least once.
type Outbox interface {
	// ClaimDeliveries leases to owner up to limit pending deliveries due at now (unleased, or
	// their lease run out), oldest due first, each as a new attempt (Delivery.Attempts); of the
	// deliveries of one key's jobs (Job.Key), only as many as leave owner holding at most
	// perKey of that key's under an unexpired lease, so that one key's slow receiver holds
	// at most perKey of a deliverer's calls.
	ClaimDeliveries(owner string, lease time.Duration, now time.Time, limit, perKey int) ([]Delivery, error)
	// FreezeBody keeps body as the delivery's body unless one was kept before, and returns
	// the kept one: every attempt sends the same bytes.
	FreezeBody(h DeliveryHold, body []byte) ([]byte, error)
	// Delivered records a 2xx answer; DeliveryFailed a failed attempt, to try again at next,
	// or for good when giveUp. ok is false, and nothing is written, when h no longer holds.
	Delivered(h DeliveryHold, status int, at time.Time) (ok bool, err error)
	DeliveryFailed(h DeliveryHold, status int, reason string, next time.Time, giveUp bool) (ok bool, err error)
	// DeliveriesOf lists a job's deliveries, in the order their events happened.
	DeliveriesOf(job string) ([]Delivery, error)
	// PendingDeliveries counts the deliveries not yet made nor given up (a metric).
	PendingDeliveries() (int, error)
}

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed" // gave up after the last attempt
)

// Delivery is one webhook call of one job's event. Status, Error, Started and Finished are
// the job as the event left it (a "started" delivery says running even if the job has
// ended since).
type Delivery struct {
	ID       string // job id ":" event (":" N for the Nth end of that kind, after a repair ran the job again)
	JobID    string
	Event    string
	URL      string
	Status   string
	Error    string
	Started  *time.Time
	Finished *time.Time
	Created  time.Time // when the event happened
	Body     []byte    // nil until the first attempt fixes it
	State    string
	Attempts int // attempts begun (claims), this one included
	Next     time.Time
	// LastStatus is the HTTP status of the last answer (0: none, e.g. a refused connection).
	LastStatus int
	LastError  string
	Delivered  *time.Time
}

// DeliveryHold is one deliverer's claim on a delivery: its owner and attempt.
type DeliveryHold struct {
	ID      string
	Owner   string
	Attempt int
}

// Hold is the claim a claimed delivery is written under.
func (d Delivery) Hold(owner string) DeliveryHold {
	return DeliveryHold{ID: d.ID, Owner: owner, Attempt: d.Attempts}
}

// Deadlines is what a shared queue adds for queue deadlines: jobs no replica holds are failed
// by the database itself, wherever they wait, so they fail even if no replica has room.
type Deadlines interface {
	// ExpireQueued fails, with reason, every job that has not started by its queue deadline
	// (at now) and that no live replica holds, and returns their ids. Claim does the same
	// first, so an expired job is never claimed.
	ExpireQueued(now time.Time, reason string) ([]string, error)
	// SetPriorityAging sets what one priority level is worth in waiting time when jobs are
	// claimed (Claim orders by created - priority x aging); every replica should agree.
	SetPriorityAging(aging time.Duration)
}

// QueueDeadlineReason is the error of a job failed at its queue deadline (QueueDeadlineCode on
// the wire).
const QueueDeadlineReason = "not started before its queue deadline (queue_timeout)"

// scanDelivery reads deliveryCols (both stores: times are Unix nanoseconds in both).
func scanDelivery(row interface{ Scan(...any) error }) (Delivery, error) {
	var d Delivery
	var started, finished, delivered *int64
	var created, next int64
	var body *string
	if err := row.Scan(&d.ID, &d.JobID, &d.Event, &d.URL, &d.Status, &d.Error, &started, &finished, &created, &body, &d.State,
		&d.Attempts, &next, &d.LastStatus, &d.LastError, &delivered); err != nil {
		return d, dbErr(err)
	}
	d.Started, d.Finished, d.Delivered = fromNanos(started), fromNanos(finished), fromNanos(delivered)
	d.Created, d.Next = time.Unix(0, created).UTC(), time.Unix(0, next).UTC()
	if body != nil {
		d.Body = []byte(*body)
	}
	return d, nil
}
