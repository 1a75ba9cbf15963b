package kafkasource

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"
)

// After a failed attempt to join, kafka-go forgets the member id it had
// and joins as a new member. A broker that kept the group (Kafka always
// does: the group's state is in a topic) still counts the old member, and
// makes the new one's join wait until the old one's session times out. The
// Source therefore asks the coordinator to remove the old member until it
// answers, while the member is out of the group.

// leaveGhost removes member id from the group, retrying every quarter of
// JoinBackoff, until it succeeds, the coordinator no longer knows the
// member, or ctx ends (the member joined again, or the Source closed).
func (s *Source) leaveGhost(ctx context.Context, id string) {
	client := &kafka.Client{Addr: kafka.TCP(s.cfg.Brokers...), Transport: s.transport, Timeout: s.cfg.Timeout}
	t := time.NewTicker(max(s.cfg.JoinBackoff/4, time.Millisecond))
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		resp, err := client.LeaveGroup(rctx, &kafka.LeaveGroupRequest{
			GroupID: s.cfg.Group,
			Members: []kafka.LeaveGroupRequestMember{{ID: id}},
		})
		cancel()
		if err == nil {
			err = resp.Error
			for _, m := range resp.Members {
				err = errors.Join(err, m.Error)
			}
		}
		if err == nil || errors.Is(err, kafka.UnknownMemberId) {
			if err == nil {
				s.log.Info("left the group as the member of before the outage, so that the join need not wait for its session to end",
					slog.String("member", id))
			}
			return
		}
		s.log.Debug("leave as the member of before the outage", slog.String("member", id), slog.String("error", err.Error()))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
