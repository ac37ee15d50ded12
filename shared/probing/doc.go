// Package probing keeps every space's reachability status true: the
// scheduler's fan-out (one message per space per interval) and the prober's
// handling of one message (mint, GET /version, state machine, conditional
// write, history, event, re-probe). It is independent of Lambda: the
// functions and the local stack feed it, and it reaches AWS and clusters
// only through the small interfaces declared here. It does not link
// client-go (the prober function passes a kubeprobe.Prober in), so the
// scheduler stays small.
//
// # Timing
//
// Every interval (one minute) the scheduler lists every registered,
// non-synthetic space from the sparse probe index, its shards in parallel,
// and sends one message per space, delayed by a stable hash of the space id
// (0..59 s) so that probes spread evenly over the minute and each space is
// probed at the same second of every minute. Each page is sent with equal
// delays side by side, so that every SendMessageBatch becomes visible at one
// instant and Lambda's pollers receive it whole (BENCHMARKS.md, "The event
// source's SQS requests"). A failed probe that leaves the
// space short of FailureThreshold failures enqueues a re-probe after
// ReprobeDelay (12 s), so three consecutive failures take about 25 s after
// the first: an outage is detected within interval + 2 × ReprobeDelay (+ the
// probe timeouts) of starting. A new space is probed at once: registration
// enqueues a message (see Enqueuer).
//
// # Duplicates are bounded
//
// Three kinds of message reach the prober: the minute tick, a registration
// probe and a re-probe. A re-probe names the version its failure stored and
// is dropped when the space has been written since, so at most one re-probe
// chain is alive per space and it ends at FailureThreshold failures (or the
// first success). A tick is dropped when the stored probe is younger than
// MinGap (20 s), so a tick landing right after a re-probe or a registration
// probe costs one read, not a probe. A failed scheduler run is not retried
// (EventBridge Scheduler invokes it asynchronously, and the template's
// EventInvokeConfig allows no retry), so a tick is sent at most once per
// schedule event; a redelivered or resent one is at worst one extra probe
// of a healthy space (whose heartbeat write is skipped anyway). So per space and minute there is one tick probe and at
// most FailureThreshold-1 re-probes, whatever the timing.
//
// # Events
//
// A status transition is stored with its history item in one transaction
// and then published to EventBridge from the prober, right after the
// write: one place, and the event carries the probe's reason, which the
// table stream would have to reconstruct. If publishing fails, the message
// is reported failed; SQS redelivers it, and a redelivered message first
// republishes the space's newest transition if it is not marked published.
// Events are therefore at least once (a crash between publishing and
// marking publishes twice); consumers key on (space_id, at).
//
// # Reads
//
// A probe reads one item: the space, strongly consistent. That read is also
// the liveness check before any cloud call: a minter that offers MintLive
// (mint.Minter) takes it instead of reading the space's kubeauth grant
// again, since registration and deregistration change both in one
// transaction. BenchmarkProbingCost counts and prices every AWS request the
// scheduler and the prober send; BenchmarkProbingCostAtScale adds those of
// Lambda's event source, counted as its pollers send them.
//
// # Writes
//
// A success on an active space with nothing else changed is stored once per
// heartbeat (space.NeedsWrite); every change is stored at once, on the
// condition that the space is at the version read and not deregistered, so a
// late probe result can never resurrect a deregistered space. A conflict
// (the version moved) re-reads and re-applies the result once.
package probing
