package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"spaces/infra/staticminter"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"spaces/infra/lambdarules"
	"spaces/shared/awsclient"
	"spaces/shared/config"
	"spaces/shared/kubecred"
	"spaces/shared/kubeprobe"
	"spaces/shared/probing"
	"spaces/shared/space"
	"spaces/shared/tracing"
	"spaces/shared/wiring"
	"spaces/shared/wiring/parts"
)

// ProbingConfig is the local stack's probing; zero values take the
// defaults.
type ProbingConfig struct {
	// Interval is how often the scheduler ticks (default: the environment's
	// SPACES_PROBE_INTERVAL, else one minute).
	Interval time.Duration
	// Minter mints cluster credentials for probes (default: Config.Minter).
	Minter kubecred.Minter
	// Disabled turns the scheduler and the poller off.
	Disabled bool
	// AsyncDelays are the waits between a failed tick's attempts (default
	// Lambda's, lambdarules.DefaultAsyncDelays; tests shorten them).
	AsyncDelays []time.Duration
}

// startProbing ticks the scheduler and polls the probe queue into the
// prober, the way EventBridge Scheduler and Lambda's SQS source do in AWS.
func (st *starting) startProbing(cfg *Config) (func(), error) {
	pc := cfg.Probing
	if pc.Disabled {
		return nil, nil
	}
	if pc.Interval == 0 {
		env := config.Env{Lookup: os.LookupEnv}
		pc.Interval = env.Duration("SPACES_PROBE_INTERVAL", space.DefaultProbeInterval)
		if err := env.Err(); err != nil {
			return nil, err
		}
	}
	switch {
	case pc.Minter != nil:
	case cfg.Minter != nil:
		pc.Minter = cfg.Minter
	default:
		pc.Minter = staticminter.Unconfigured{}
	}
	queue, ok := st.Resources["ProbeQueue"]
	if !ok {
		return nil, errors.New("the template declares no ProbeQueue")
	}
	settings := wiring.ProberSettings{
		Common:     st.common(cfg),
		ProbeQueue: queue.URL, EventBus: st.Resources["EventBus"].Name,
		Interval: pc.Interval,
	}
	checker := &kubeprobe.Prober{Timeout: probing.DefaultTimeout}
	sched := wiring.Scheduler(st.aws, wiring.SchedulerSettings{Table: st.Table, ProbeQueue: queue.URL, Interval: pc.Interval}, cfg.Log)
	prober := wiring.Prober(st.aws, settings, pc.Minter, checker, cfg.Log)
	sqsc := awsclient.SQS(st.AWS, st.EmulatorURL)
	st.ProbeQueue = probing.Enqueuer{Queue: parts.ProbeQueue{Q: st.aws.Queue(queue.URL)}}

	handle := tracing.Handler(cfg.Tracing, "scheduler", sched.HandleSchedule)
	// EventBridge Scheduler invokes the scheduler asynchronously: Lambda's
	// retries, event age and on-failure destination apply, as the
	// function's EventInvokeConfig sets them.
	fn := st.Functions.Get("SchedulerFunction")
	async := &lambdarules.AsyncInvoker{Function: fn, Delays: pc.AsyncDelays}
	if fn.Async.OnFailure != "" {
		dest, ok := st.Resources[fn.Async.OnFailure]
		if !ok {
			return nil, fmt.Errorf("the scheduler's on-failure destination %s is not a queue the template declares", fn.Async.OnFailure)
		}
		async.OnFailure = func(ctx context.Context, record []byte) error {
			_, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dest.URL), MessageBody: aws.String(string(record))})
			return err
		}
	}
	st.tick = func(ctx context.Context, input json.RawMessage) lambdarules.AsyncResult {
		res := async.Invoke(ctx, input, func(ctx context.Context, in json.RawMessage) error {
			_, err := handle(ctx, in)
			return err
		})
		if res.Condition != "" && ctx.Err() == nil {
			cfg.Log.Error("scheduler tick dropped", "condition", res.Condition, "attempts", res.Attempts, "error", res.Err)
		}
		return res
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { tickEvery(ctx, pc.Interval, st.tick, &wg) })
	// Lambda's event source mapping as AWS runs it for the template's
	// Probes event: five pollers at least, its batch size and window.
	proberFn := st.function("ProberFunction")
	poller := &lambdarules.Poller{SQS: sqsc, QueueURL: queue.URL, QueueARN: queue.ARN, Function: proberFn, Source: proberFn.Sources["Probes"],
		Pollers: lambdarules.MinPollers, DLQURL: st.Resources["ProbeDLQ"].URL, Handler: tracing.Handler(cfg.Tracing, "prober", prober.HandleSQS), Log: cfg.Log}
	wg.Go(func() { poller.Run(ctx) })
	return func() {
		cancel()
		wg.Wait()
		checker.Close()
	}, nil
}

// tickEvery hands the scheduler an event at once and then every interval,
// as the minute schedule does in AWS (where schedules fire; kumo's do
// not). Each event is an asynchronous invocation: the ticker does not wait
// for it.
func tickEvery(ctx context.Context, interval time.Duration, tick func(context.Context, json.RawMessage) lambdarules.AsyncResult, wg *sync.WaitGroup) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		wg.Go(func() { tick(ctx, nil) })
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
