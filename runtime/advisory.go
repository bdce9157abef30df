package runtime

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
)

// maxDeliveriesAdvisory is the part of JetStream's MAX_DELIVERIES advisory
// the runtime reads.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

func maxDeliveriesSubject(stream, durable string) string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + stream + "." + durable
}

// watchMaxDeliveries dead-letters messages whose last delivery ended without
// a handler result: the process died, or the handler hung past ackWait with
// its heartbeat gone. JetStream stops delivering such a message and only
// says so in this advisory, so without it the message would vanish. A queue
// group makes one instance act on each advisory; the dead letter's message
// ID makes a repeat harmless anyway.
func (b *binding) watchMaxDeliveries(nc *nats.Conn) (*nats.Subscription, error) {
	subject := maxDeliveriesSubject(b.spec.Stream, b.spec.Durable)
	sub, err := nc.QueueSubscribe(subject, "jetfn-"+b.spec.Name, func(m *nats.Msg) {
		var adv maxDeliveriesAdvisory
		if err := json.Unmarshal(m.Data, &adv); err != nil {
			b.log.Warn("reading a max-deliveries advisory", "err", err)
			return
		}
		if err := b.deadLetterBySequence(adv); err != nil {
			b.log.Error("dead-lettering after max deliveries", "stream_seq", adv.StreamSeq, "err", err)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribing to max-deliveries advisories of %s: %w", b.spec.Name, err)
	}
	return sub, nil
}

func (b *binding) deadLetterBySequence(adv maxDeliveriesAdvisory) error {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	raw, err := b.stream.GetMsg(ctx, adv.StreamSeq)
	if err != nil {
		return fmt.Errorf("loading message %d: %w", adv.StreamSeq, err)
	}
	reason := fmt.Sprintf("delivered %d times (maxDeliver) without a handler result: "+
		"the last delivery's process stopped or the handler outlived ackWait", adv.Deliveries)
	dl := deadLetter{
		function: b.spec.Name, stream: adv.Stream, subject: raw.Subject,
		sequence: adv.StreamSeq, numDelivered: adv.Deliveries,
		data: raw.Data, header: raw.Header, reason: reason,
	}
	if err := publishDeadLetter(ctx, b.js, b.dlSubject, dl); err != nil {
		return err
	}
	b.stats.deadLettered.Add(1)
	b.log.Error("dead-lettered after max deliveries", "stream_seq", adv.StreamSeq, "num_delivered", adv.Deliveries)
	return nil
}
