package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"spaces/infra/emulator"
	"spaces/shared/awsclient"
)

// streamFixture is a stack whose own cascade poller is off, with a poller on
// the table's stream following the template's source, but unfiltered and
// with a handler of the test's choosing.
type streamFixture struct {
	st     *Stack
	poller *StreamPoller
	mu     sync.Mutex
	seen   map[string]int // sk → successful deliveries
	seqOf  map[string]string
}

func newStreamFixture(t *testing.T, handle func(sk string) error, report bool) *streamFixture {
	t.Helper()
	prefix := fmt.Sprintf("s%d%d-", time.Now().UnixNano()%1e6, stackSeq.Add(1))
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Log: slog.New(slog.DiscardHandler), Probing: ProbingConfig{Disabled: true},
		Cascade: CascadeConfig{Disabled: true}, Names: func(id string) string { return prefix + id },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	f := &streamFixture{st: st, seen: map[string]int{}, seqOf: map[string]string{}}
	src := st.CascadeSource
	src.Patterns = nil // every record: this test is about delivery, not filtering
	src.ReportBatchItemFailures = true
	q := st.Resources[src.OnFailure]
	f.poller = &StreamPoller{
		Streams: emulator.Streams(st.AWS, st.EmulatorURL), StreamARN: st.Resources[src.Table].StreamARN,
		Source: src, Failures: awsclient.SQS(st.AWS, st.EmulatorURL), FailureQueueURL: q.URL,
		RetryDelay: time.Millisecond, Log: slog.New(slog.DiscardHandler),
		Handler: func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			var resp events.DynamoDBEventResponse
			for _, r := range ev.Records {
				sk := r.Change.Keys["sk"].String()
				f.mu.Lock()
				f.seqOf[sk] = r.Change.SequenceNumber
				f.mu.Unlock()
				if err := handle(sk); err != nil {
					if !report {
						return resp, err
					}
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
					return resp, nil
				}
				f.mu.Lock()
				f.seen[sk]++
				f.mu.Unlock()
			}
			return resp, nil
		},
	}
	if err := f.poller.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *streamFixture) put(t *testing.T, n int) []string {
	t.Helper()
	db := awsclient.DynamoDB(f.st.AWS, f.st.EmulatorURL)
	var sks []string
	for i := range n {
		sk := fmt.Sprintf("R#%02d", i)
		sks = append(sks, sk)
		if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(f.st.Table), Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: "STREAMTEST"}, "sk": &ddbtypes.AttributeValueMemberS{Value: sk},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	return sks
}

func (f *streamFixture) failures(t *testing.T) []FailureRecord {
	t.Helper()
	q := f.st.Resources[f.st.CascadeSource.OnFailure]
	out, err := awsclient.SQS(f.st.AWS, f.st.EmulatorURL).ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	var frs []FailureRecord
	for _, m := range out.Messages {
		var fr FailureRecord
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &fr); err != nil {
			t.Fatal(err)
		}
		frs = append(frs, fr)
	}
	return frs
}

// TestPoisonRecordIsBisectedOut: the handler fails the whole batch whenever
// it meets one record; the poller bisects until that record is alone,
// retries it MaximumRetryAttempts times, sends it to the failure queue and
// processes every other record.
func TestPoisonRecordIsBisectedOut(t *testing.T) {
	attempts := 0
	f := newStreamFixture(t, func(sk string) error {
		if sk == "R#06" {
			attempts++
			return errors.New("poison")
		}
		return nil
	}, false)
	sks := f.put(t, 10) // one batch of 10 (the template's BatchSize)
	if n, err := f.poller.Poll(t.Context()); err != nil || n != 10 {
		t.Fatalf("poll: %d %v", n, err)
	}
	for _, sk := range sks {
		if got := f.seen[sk]; (sk == "R#06") != (got == 0) {
			t.Errorf("%s handled %d times", sk, got)
		}
	}
	// The first invocation, the bisections that still held it, then the
	// retries of the record alone.
	if max := f.st.CascadeSource.MaximumRetryAttempts; attempts < max+1 {
		t.Errorf("the poison record was tried %d times, want at least %d", attempts, max+1)
	}
	frs := f.failures(t)
	if len(frs) != 1 {
		t.Fatalf("%d failure records, want 1: %+v", len(frs), frs)
	}
	b := frs[0].BatchInfo
	if b.BatchSize != 1 || b.StartSequenceNumber != f.seqOf["R#06"] || b.EndSequenceNumber != b.StartSequenceNumber ||
		frs[0].RequestContext.Condition != "RetryAttemptsExhausted" || b.StreamArn != f.poller.StreamARN || b.ShardID == "" {
		t.Errorf("failure record %+v", frs[0])
	}
	// Nothing new: the next poll delivers nothing again.
	before := fmt.Sprint(f.seen)
	if _, err := f.poller.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if after := fmt.Sprint(f.seen); after != before {
		t.Errorf("a second poll redelivered: %s, was %s", after, before)
	}
}

// TestReportedFailureRetriesFromThatRecord: with ReportBatchItemFailures the
// records before the reported one are not delivered again; a record that
// recovers on retry is processed and nothing reaches the failure queue.
func TestReportedFailureRetriesFromThatRecord(t *testing.T) {
	fails := 2
	f := newStreamFixture(t, func(sk string) error {
		if sk == "R#03" && fails > 0 {
			fails--
			return errors.New("transient")
		}
		return nil
	}, true)
	f.poller.Source.BisectBatchOnFunctionError = false
	sks := f.put(t, 6)
	if _, err := f.poller.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, sk := range sks {
		got = append(got, f.seen[sk])
	}
	if !slices.Equal(got, []int{1, 1, 1, 1, 1, 1}) {
		t.Errorf("deliveries per record %v, want each exactly once", got)
	}
	if frs := f.failures(t); len(frs) != 0 {
		t.Errorf("failure records %+v", frs)
	}
}

// losingStreams answers GetRecords with an error once lose is set, after
// the emulator has served it: the iterator is used up and the records
// read are lost on the way, as when the SDK retries a request whose answer
// did not arrive.
type losingStreams struct {
	StreamsAPI
	lose bool
}

func (l *losingStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	out, err := l.StreamsAPI.GetRecords(ctx, in, opts...)
	if l.lose && err == nil {
		l.lose = false
		return nil, errors.New("the answer was lost")
	}
	return out, err
}

// TestLostReadResumesFromTheCheckpoint: a read whose answer is lost (its
// records and its used-up iterator with it) is followed by one that
// resumes after the last record handled, as Lambda's checkpoint does: the
// lost records are delivered, each record exactly once, and the records
// in the stream before the poller started (LATEST) never.
func TestLostReadResumesFromTheCheckpoint(t *testing.T) {
	f := newStreamFixture(t, func(string) error { return nil }, false)
	f.put(t, 3) // before a second poller starts at LATEST: never its to deliver
	late := &StreamPoller{Streams: f.poller.Streams, StreamARN: f.poller.StreamARN, Source: f.poller.Source,
		Handler: f.poller.Handler, RetryDelay: time.Millisecond, Log: slog.New(slog.DiscardHandler)}
	if err := late.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	clear(f.seen)
	losing := &losingStreams{StreamsAPI: late.Streams}
	late.Streams = losing
	db := awsclient.DynamoDB(f.st.AWS, f.st.EmulatorURL)
	put := func(sk string) {
		if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(f.st.Table), Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: "STREAMTEST"}, "sk": &ddbtypes.AttributeValueMemberS{Value: sk},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	put("L#1")
	if _, err := late.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	put("L#2")
	put("L#3")
	losing.lose = true
	if _, err := late.Poll(t.Context()); err == nil {
		t.Fatal("the lost read was not reported")
	}
	put("L#4")
	for range 3 {
		if _, err := late.Poll(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{"L#1": 1, "L#2": 1, "L#3": 1, "L#4": 1}
	if fmt.Sprint(f.seen) != fmt.Sprint(want) {
		t.Errorf("delivered %v, want each L# record once and no R# record: %v", f.seen, want)
	}
}

// TestCheckpointFileResumesAfterARestart: a poller with a checkpoint file
// that stops (a crash: nothing more is written) is followed by one on the
// same file, which delivers what was written meanwhile, each record once,
// and nothing the first handled; a poller without the file starts at
// LATEST and misses those records, and so does one whose file is of
// another stream.
func TestCheckpointFileResumesAfterARestart(t *testing.T) {
	f := newStreamFixture(t, func(string) error { return nil }, false)
	dir := t.TempDir()
	seen := map[string]int{}
	poller := func(file string) *StreamPoller {
		p := &StreamPoller{Streams: f.poller.Streams, StreamARN: f.poller.StreamARN, Source: f.poller.Source,
			RetryDelay: time.Millisecond, Log: slog.New(slog.DiscardHandler), Checkpoint: file,
			Handler: func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				for _, r := range ev.Records {
					seen[file+" "+r.Change.Keys["sk"].String()]++
				}
				return events.DynamoDBEventResponse{}, nil
			}}
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		return p
	}
	poll := func(p *StreamPoller) {
		for range 2 {
			if _, err := p.Poll(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	db := awsclient.DynamoDB(f.st.AWS, f.st.EmulatorURL)
	put := func(sk string) {
		if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(f.st.Table), Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: "STREAMTEST"}, "sk": &ddbtypes.AttributeValueMemberS{Value: sk},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	kept, other := filepath.Join(dir, "kept.json"), filepath.Join(dir, "other.json")
	if err := os.WriteFile(other, []byte(`{"stream_arn":"arn:aws:dynamodb:us-east-1:000000000000:table/gone/stream/x","shards":{"shardId-000000000000":"000000000000000000001"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	first := poller(kept)
	put("C#1")
	put("C#2")
	poll(first)
	// The first poller dies here; these come while no poller runs.
	put("C#3")
	put("C#4")
	second, fresh, stranger := poller(kept), poller(filepath.Join(dir, "none.json")), poller(other)
	for _, p := range []*StreamPoller{second, fresh, stranger} {
		poll(p)
	}
	want := map[string]int{kept + " C#1": 1, kept + " C#2": 1, kept + " C#3": 1, kept + " C#4": 1}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("delivered %v; want %v: the second poller resumes after the first's checkpoint, the others start at LATEST", seen, want)
	}
}

// TestStartingPositionSurvivesACrash: a poller with a checkpoint file
// that dies before it has handled a batch (killed in its first batch, or
// before its first poll: nothing more was written after Start) is
// followed by one on the same file, which delivers what was written since
// the first one started, each record once, and nothing from before it;
// both on a shard that was empty at the first start and on one that held
// records. Were the starting position (LATEST) only in memory, the second
// poller would find no file, take LATEST again and skip those records:
// the events the local stack lost across kill -9 under load, when the
// kill came during the first batch after a start.
func TestStartingPositionSurvivesACrash(t *testing.T) {
	f := newStreamFixture(t, func(string) error { return nil }, false)
	ctx := t.Context()
	ss := f.poller.Streams
	d, err := ss.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(f.poller.StreamARN)})
	if err != nil || len(d.StreamDescription.Shards) != 1 {
		t.Fatalf("describe stream: %v %v", d, err)
	}
	it, err := ss.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(f.poller.StreamARN),
		ShardId: d.StreamDescription.Shards[0].ShardId, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := ss.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator}); err != nil || len(out.Records) != 0 {
		t.Fatalf("the stream is not empty before the first case (%v): %d records", err, len(out.Records))
	}
	dir := t.TempDir()
	seen := map[string]int{}
	poller := func(file string) *StreamPoller {
		p := &StreamPoller{Streams: ss, StreamARN: f.poller.StreamARN, Source: f.poller.Source,
			RetryDelay: time.Millisecond, Log: slog.New(slog.DiscardHandler), Checkpoint: file,
			Handler: func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				for _, r := range ev.Records {
					seen[filepath.Base(file)+" "+r.Change.Keys["sk"].String()]++
				}
				return events.DynamoDBEventResponse{}, nil
			}}
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return p
	}
	poll := func(p *StreamPoller) {
		for range 2 {
			if _, err := p.Poll(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	db := awsclient.DynamoDB(f.st.AWS, f.st.EmulatorURL)
	put := func(sk string) {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.st.Table), Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: "STREAMTEST"}, "sk": &ddbtypes.AttributeValueMemberS{Value: sk},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	empty, held := filepath.Join(dir, "empty.json"), filepath.Join(dir, "held.json")

	// An empty shard: the first poller starts, then dies.
	poller(empty)
	put("E#1")
	put("E#2")
	poll(poller(empty))

	// A shard with records (E#1, E#2 and these) before the first start.
	put("H#0")
	poller(held)
	put("H#1")
	put("H#2")
	poll(poller(held))

	want := map[string]int{"empty.json E#1": 1, "empty.json E#2": 1, "held.json H#1": 1, "held.json H#2": 1}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("delivered %v; want %v: a restart resumes at the position its first start took, not at a new LATEST", seen, want)
	}
}
