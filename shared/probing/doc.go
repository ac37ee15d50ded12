// Package probing keeps every space's reachability status true: the
// scheduler's fan-out (a probe of every space per interval, up to MaxSpaces
// spaces a message) and the prober's handling of each space of a message
// (mint, GET /version, state machine, conditional write, history, event,
// re-probe). It is independent of Lambda: the
// functions and the local stack feed it, and it reaches AWS and clusters
// only through the small interfaces declared here. It does not link
// client-go (the prober function passes a kubeprobe.Prober in), so the
// scheduler stays small.
//
// # Timing
//
// Every interval (one minute) the scheduler lists every registered,
// non-synthetic space from the sparse probe index, its shards in parallel,
// and probes each space delayed by a stable hash of its id (0..59 s) so
// that probes spread evenly over the minute and each space is probed at the
// same second of every minute. The spaces of one index page that share a
// delay go in one message, up to MaxSpaces (SQS's sends, receives and
// deletes fall by the spaces a message holds), and the
// messages of a page are sent in order of delay, so that every
// SendMessageBatch becomes visible at one instant and Lambda's pollers
// receive it whole (BENCHMARKS.md, "Monthly cost per 1,000 spaces"). A
// re-probe and a registration probe name one space. A failed probe that leaves the
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
// most FailureThreshold-1 re-probes, whatever the timing (a space sent
// again after its part of a message failed adds at most one, see below).
//
// # Several spaces a message
//
// The prober handles each space of a message on its own, as if it were its
// own message: its strongly consistent read right before any cloud call (a
// space deregistered meanwhile is refused while its siblings are probed),
// its conditional write, its re-probe (always a message of its own). The
// template's BatchSize (1 message) × MaxSpaces is DefaultConcurrency (50):
// a batch's spaces are probed at once, in one round that the function's
// Timeout holds. A space fails only on an infrastructure error (the store or
// the event bus unreachable). What SQS retries is per message, so when some
// but not all spaces of a message fail, the prober acknowledges the message
// and sends the failed spaces again as one message marked Retry, after
// ReprobeDelay: their siblings, probed and stored, are not probed again,
// nor dead-lettered for a sibling's sake. A Retry is handled as a
// redelivery (a missed transition is republished first) and is never split
// again: if it fails, SQS retries it whole, and its redrive policy
// dead-letters what keeps failing. A message whose spaces all failed (the
// store down, most likely), a message of one space, and a message whose
// failed spaces cannot be sent again are retried whole by SQS; its
// siblings are then probed again when it comes back, as for any tick SQS
// delivers twice (at-least-once; an unchanged result is not written before
// the heartbeat). The one-space form stays readable, so a deploy needs no
// draining; a prober that reads only that form fails a message of several
// spaces as malformed, which SQS redelivers to a prober that reads it after
// the visibility timeout (each such receive counts toward the queue's
// maxReceiveCount: a tick dead-lettered by a long deploy is replaced by the
// next minute's).
//
// # Events
//
// A status transition is stored with its history item in one transaction
// and then published to EventBridge from the prober, right after the
// write: one place, and the event carries the probe's reason, which the
// table stream would have to reconstruct. If publishing fails, the space
// fails (its message is retried, or the space alone sent again, above),
// and a redelivered message first republishes the space's newest
// transition if it is not marked published.
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
