package iotcore

import (
	"math"
	"sync/atomic"
	"time"
)

// Usage is what IoT Core would bill, for the cost benchmark.
type Usage struct {
	// ConnectionMinutes: each connection's duration rounded up to whole
	// minutes ("metered in 1-minute increments": the pricing page,
	// https://aws.amazon.com/iot-core/pricing/; the rule is quoted from a
	// third-party summary of it), open connections up to Config.Now.
	ConnectionMinutes float64
	// Messages in 5 KB units as the pricing page meters them
	// (https://aws.amazon.com/iot-core/pricing/additional-details/): CONNECT
	// (client id, username, password, will), SUBSCRIBE (filters), PUBLISH in
	// and out (topic and payload), PUBACK from the device (one unit), and a
	// data-plane request's body. PINGREQ, PINGRESP, DISCONNECT, CONNACK,
	// SUBACK and the service's PUBACK are not metered. Lifecycle events are
	// metered only when delivered to a subscriber. A refused CONNECT is
	// metered too; a PUBLISH refused by the policy is not.
	Messages        int64
	AuthorizerCalls int64 // custom authorizer invocations (connects and refreshes)
	RulesTriggered  int64 // messages a rule selected
	RuleActions     int64 // actions run
}

type usage struct {
	messages, authorizerCalls, rulesTriggered, ruleActions atomic.Int64
	closedMinutes                                          float64 // guarded by Broker.mu
}

// messageUnit is the 5 KB metering increment.
const messageUnit = 5 * 1024

// units is the number of 5 KB messages n bytes are metered as (at least one).
func units(n int) int64 {
	if n <= messageUnit {
		return 1
	}
	return int64((n + messageUnit - 1) / messageUnit)
}

// billedMinutes rounds a connection's duration up to whole minutes, at least one.
func billedMinutes(d time.Duration) float64 {
	return math.Max(1, math.Ceil(d.Minutes()))
}

// Usage reports the metering so far.
func (b *Broker) Usage() Usage {
	now := b.now()
	b.mu.Lock()
	minutes := b.usage.closedMinutes
	for _, c := range b.conns {
		minutes += billedMinutes(now.Sub(c.since))
	}
	b.mu.Unlock()
	return Usage{
		ConnectionMinutes: minutes,
		Messages:          b.usage.messages.Load(),
		AuthorizerCalls:   b.usage.authorizerCalls.Load(),
		RulesTriggered:    b.usage.rulesTriggered.Load(),
		RuleActions:       b.usage.ruleActions.Load(),
	}
}
