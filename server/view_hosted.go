package server

import (
	"marspec/api"
	"marspec/store"
)

// checkHostedFields checks what a request asks of the hosted service rather than of the
// models: its priority (in range, and within what the caller's key may ask) and queue
// deadline, and its webhook.
func (s *Server) checkHostedFields(req *api.GenerateRequest, who caller) error {
	if err := s.checkQueueFields(req); err != nil {
		return err
	}
	if err := checkKeyPriority(who, *req); err != nil {
		return err
	}
	return s.checkWebhook(req)
}

// wireHosted adds a job's priority, queue deadline, error code and webhook to its JSON.
func wireHosted(g *api.Generation, j store.Job) {
	g.Priority = priority(j.Request)
	g.QueueDeadline = queueDeadline(j)
	g.ErrorCode = errorCode(j.Status, j.Error)
	g.Webhook = wireWebhook(j.Request, nil)
}

// addDeliveries adds the state of a job's webhook deliveries to its JSON (one job's GET).
func (s *Server) addDeliveries(g *api.Generation) error {
	o, ok := s.store.Meta.(store.Outbox)
	if g.Webhook == nil || !ok {
		return nil
	}
	ds, err := o.DeliveriesOf(g.ID)
	if err != nil {
		return err
	}
	g.Webhook.Deliveries = wireWebhook(api.GenerateRequest{Webhook: g.Webhook.URL}, ds).Deliveries
	return nil
}
