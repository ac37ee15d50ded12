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
// and sends each index page's spaces, in order of a stable hash of their
// ids (0..59 s), in as few messages as MaxSpaces allows, each delayed by
// its first space's hash: probes spread over the minute and a space is
// probed at the same second of every minute while its page keeps its
// spaces. Full messages share the prober's fence read of a message among
// up to MaxSpaces spaces, and SQS's sends, receives and deletes fall by
// the spaces a message holds; the
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
// of a healthy space (whose unchanged result writes nothing). So per space and minute there is one tick probe and at
// most FailureThreshold-1 re-probes, whatever the timing (a space sent
// again after its part of a message failed adds at most one, see below).
//
// # Several spaces a message
//
// The prober handles each space of a message on its own, as if it were its
// own message, after one liveness read for the whole message (see Reads: a
// space deregistered meanwhile is refused while its siblings are probed;
// none for agent spaces):
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
// delivers twice (at-least-once; an unchanged result is not written).
// The one-space form stays readable, so a deploy needs no
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
// In steady state a probe reads no item of its space (an agent space's
// check, its lease alone: below). A tick message
// carries its spaces as the probe index holds them (space.ProbeTarget: its
// ids, its probe shard and its digest, space.ProbeDigest: identity,
// status, failure count and reason, last stored probe to the second,
// fingerprints of the facts, version; rewritten with every write of the
// space) and the time ReadAt its page was read. Before
// any cloud call the prober reads, strongly consistent, the deregistration
// fence of the message's shard since space.LiveAt(ReadAt): one Query a
// message of direct spaces (a page's spaces share a shard), whatever its
// spaces. A space in it is refused (gone); a message
// older than the fence covers (space.FenceCovers) is dropped whole and the
// next tick sends its spaces again. Why this keeps "a deregistered space is
// refused before any cloud call" is space.FenceRetention's comment: the
// index lists no space deregistered more than space.ProbeIndexLag before
// the read, and the fence holds every deregistration since.
// TestDeregisteredAtEveryInstantOfAMessage deregisters a space before the
// index read, between the read and the send and while the message waits
// (no mint, no GET /version), and during the probe (after the fence read no
// read can refuse it: the result is not stored and no later message calls
// out for it).
//
// An agent space's tick carries its state likewise (the scheduler packs
// the agent spaces of every shard, MaxSpaces a message, with the tick's
// start as ReadAt), and its steady check reads one item, its lease,
// eventually consistent: half a read unit (TestSteadyAgentCheckReadsHalfAUnit).
// A result that would be written (the digest's NeedsWrite) is decided
// again on a strongly consistent read of the lease, so a read a moment
// stale writes nothing, and at worst leaves a change to the next tick
// (TestStaleLeaseReadWritesNothing). No fence is read for an agent space
// (its message mixes the 16 shards: up to 16 Queries a message): its check
// calls no cloud and no cluster, and its only effects, a status write and
// then a transition event and a re-probe, follow a write that reads the
// space and is conditional on its not being deregistered, so a space
// deregistered at any instant gets nothing written, published or sent
// again, and its message is acknowledged
// (TestAgentDeregisteredAtEveryInstant).
//
// A registration probe, a re-probe, a space sent again by its failed
// message's prober in an older form, and a tick of ids only (as a
// scheduler before carried agent spaces sent them, still read) carry ids
// only: the prober reads the space (LiveSpace, strongly consistent), which
// is their liveness check, and an agent space's lease strongly consistent
// (a lapsed lease's check, sent right after the renewal, must see it). A
// minter that offers MintLive (mint.Minter) takes the liveness read instead of reading the space's kubeauth grant
// again, since registration and deregistration change both (and the
// fence) in one transaction. BenchmarkProbingCost counts and prices every
// AWS request the scheduler and the prober send;
// BenchmarkProbingCostAtScale adds those of Lambda's event source,
// counted as its pollers send them.
//
// # Writes
//
// Only a change is stored (space.NeedsWrite: a transition, a reason, a
// server version, a serving certificate (its notAfter or issuer, from the
// probe's own handshake; TestCertificateFactWrittenOnlyOnChange), a failure
// count below the threshold, an inventory threshold reached and not yet
// announced: space.Announce, whose write the table's stream turns into
// space.support_ending or space.certificate_expiring;
// TestInventoryEventsOncePerThreshold), at once, on the condition that the space is
// at the version read and not deregistered, so a late probe result can
// never resurrect a deregistered space. For a carried space the prober
// decides from its digest (space.ProbeDigest.NeedsWrite, which
// TestDigestNeedsWrite holds to NeedsWrite): unchanged, nothing is read or
// written; changed, the space is read (strongly consistent) and the result
// applied to it, since a write stores what the digest does not hold (the
// message, the times, the facts themselves). A conflict (the version
// moved) re-reads the space and re-applies the result once.
//
// # Beats: last_probe_at and a stopped prober
//
// What shows that an unchanged space is still probed is its shard's beat,
// not its item: the scheduler marks the last message of each shard's tick
// (of the agent spaces' too, shard "a") with the shard and the tick's time,
// and the prober, once it has handled that message, records the shard's
// beat (one conditional UpdateItem of one item, a shard and tick). Readers
// see a space's last_probe_at as the later of its stored probe and its
// shard's beat (space.Space.WithBeat): the tick the space belonged to, so
// precise to an interval (its probe ran within the interval after it).
// With the prober stopped the beats stop, and every space of the shard
// reads unknown (ProbeStale) once its beat is StaleAfter (three intervals)
// old; each beat reports whether its shard read so until then (Ticks and
// StaleTicks, a shard and tick: the StaleStatusAlarm).
package probing
