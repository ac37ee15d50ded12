package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"spaces/infra/emulator"
	"spaces/shared/eventfilter"
)

// StreamsAPI is the part of the DynamoDB Streams client a StreamPoller uses.
type StreamsAPI interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// SQSSender sends to the failure destination.
type SQSSender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// StreamPoller is Lambda's DynamoDB stream event source mapping, locally:
// it reads every shard of a stream (DescribeStream, GetShardIterator at the
// shard's start, then GetRecords, passing over what the source's
// StartingPosition or the checkpoint leaves behind), converts the records into
// events.DynamoDBEvent as Lambda delivers them, keeps only those the
// source's FilterCriteria patterns match (the template's own patterns,
// through shared/eventfilter), and hands them to Handler in batches of
// BatchSize, in order. Like Lambda it
//   - resumes after the records a batch acknowledged: with
//     ReportBatchItemFailures, the batch is retried from the first reported
//     sequence number (an unknown one fails the whole batch);
//   - on a handler error or a reported failure splits the batch in two when
//     BisectBatchOnFunctionError is set, until the failing record is alone;
//   - retries a failing batch MaximumRetryAttempts times, then sends a
//     failure record (the batch's shard and sequence range) to the OnFailure
//     queue and moves on;
//   - with Checkpoint set, keeps its checkpoint durably, as the event
//     source mapping does, so that a restart resumes where the last run
//     left off rather than at LATEST, which would skip what was written
//     meanwhile. It is written when Start has taken the starting position
//     (so that a run killed before its first batch was handled leaves it
//     behind, TestStartingPositionSurvivesACrash) and after each batch the
//     handler took (or the failure destination did): a batch handled and
//     not yet checkpointed when the process dies is handled again, which
//     is Lambda's contract too (at least once; webhook receivers drop the
//     duplicate by its webhook-id). TestNoEventLostAcrossKill9 kills a
//     persisting stack during deliveries and counts what arrived.
type StreamPoller struct {
	Streams   StreamsAPI
	StreamARN string
	Source    emulator.StreamSource
	Handler   func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
	// Failures and FailureQueueURL are the OnFailure destination (nil: the
	// failed records are only logged).
	Failures        SQSSender
	FailureQueueURL string
	// Interval is the pause between polls of an idle stream (default 200 ms).
	Interval time.Duration
	// RetryDelay is the pause before retrying a failed batch (default 50 ms).
	RetryDelay time.Duration
	// Checkpoint is the file the checkpoint is kept in ("": in memory
	// only; the local stack sets it when it persists).
	Checkpoint string
	Log        *slog.Logger

	patterns  []*eventfilter.Pattern
	iterators map[string]*string // shard id → next iterator
	// after is each shard's checkpoint, as Lambda keeps one: the sequence
	// number of the last record handled (delivered or filtered out).
	after map[string]string
}

// Start compiles the filter and positions an iterator on every shard: after
// the Checkpoint file's sequence number for the shards it knows, else at
// the source's StartingPosition. Records written after Start returns are
// seen (with LATEST). With Checkpoint set, the position is on disk when
// Start returns, before any record is read: an event source mapping fixes
// its starting position once, when it is created, and so does the first
// run here; a restart that found no file would take LATEST again, after
// the records written since, and skip every one not yet handled
// (TestStartingPositionSurvivesACrash).
func (p *StreamPoller) Start(ctx context.Context) error {
	p.patterns = nil
	for _, pat := range p.Source.Patterns {
		c, err := eventfilter.Compile(pat)
		if err != nil {
			return err
		}
		p.patterns = append(p.patterns, c)
	}
	p.iterators, p.after = map[string]*string{}, map[string]string{}
	saved, err := p.readCheckpoint()
	if err != nil {
		return err
	}
	// Every shard is read from its start (the emulator's iterators cannot
	// start after a sequence number) and Poll passes over what its
	// checkpoint covers.
	if _, err := p.discover(ctx); err != nil {
		return err
	}
	for shard, it := range p.iterators {
		if seq, ok := saved[shard]; ok {
			p.after[shard] = seq
			continue
		}
		if p.Source.StartingPosition != string(stypes.ShardIteratorTypeLatest) {
			continue // TRIM_HORIZON: from the start, as discover left it
		}
		// LATEST: what the shard holds now is read and passed over, so
		// that a lost iterator can be replaced from the checkpoint rather
		// than from a later LATEST, which would skip what came meanwhile.
		// A read whose answer was lost used its iterator up (see
		// reposition): the shard is read again from its start.
		var err error
		for range 3 {
			if err = p.passOver(ctx, shard, it); err == nil {
				break
			}
			p.reposition(ctx, shard)
			it = p.iterators[shard]
		}
		if err != nil {
			return err
		}
	}
	return p.save()
}

// passOver reads shard from it to its end, handling nothing: the shard's
// checkpoint is its last record, and its iterator the one after it.
func (p *StreamPoller) passOver(ctx context.Context, shard string, it *string) error {
	for it != nil {
		out, err := p.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		if err != nil {
			return fmt.Errorf("get records %s: %w", shard, err)
		}
		it = out.NextShardIterator
		if len(out.Records) == 0 {
			break
		}
		p.after[shard] = aws.ToString(out.Records[len(out.Records)-1].Dynamodb.SequenceNumber)
	}
	p.iterators[shard] = it
	return nil
}

// reposition replaces shard's iterator after a failed read: the failed
// request may have used it up (the emulator's iterators serve once, and the
// SDK retries a request whose answer was lost), so it is read again from
// the shard's start, and Poll passes over what the checkpoint covers.
func (p *StreamPoller) reposition(ctx context.Context, shard string) {
	it, err := p.Streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: aws.String(p.StreamARN), ShardId: aws.String(shard), ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		p.log().Error("stream shard iterator not replaced; retried at the next poll", "stream", p.StreamARN, "shard", shard, "error", err)
		return
	}
	p.iterators[shard] = it.ShardIterator
}

// discover adds an iterator for every shard not known yet, at the shard's
// start, with an empty checkpoint (nothing of it handled); it reports
// whether it found any. A shard found after the start is a new one,
// read from its beginning.
func (p *StreamPoller) discover(ctx context.Context) (bool, error) {
	out, err := p.Streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(p.StreamARN)})
	if err != nil {
		return false, fmt.Errorf("describe stream: %w", err)
	}
	found := false
	for _, sh := range out.StreamDescription.Shards {
		id := aws.ToString(sh.ShardId)
		if _, ok := p.iterators[id]; ok {
			continue
		}
		it, err := p.Streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: aws.String(p.StreamARN), ShardId: sh.ShardId, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			return found, fmt.Errorf("shard iterator %s: %w", id, err)
		}
		p.iterators[id] = it.ShardIterator
		if _, ok := p.after[id]; !ok {
			p.after[id] = ""
		}
		found = true
	}
	return found, nil
}

// Run polls until ctx ends. Start must have succeeded.
func (p *StreamPoller) Run(ctx context.Context) {
	interval := p.Interval
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	for ctx.Err() == nil {
		n, err := p.Poll(ctx)
		if err != nil && ctx.Err() == nil {
			p.log().Error("stream poll failed", "stream", p.StreamARN, "error", err)
		}
		if n > 0 && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}

// Poll reads what is new on every shard and delivers it; it returns how
// many records it read (filtered ones included).
func (p *StreamPoller) Poll(ctx context.Context) (int, error) {
	// A new shard is kept in the checkpoint at once, from its start: a
	// restart must not take it for one to start at LATEST.
	if found, err := p.discover(ctx); err != nil {
		return 0, err
	} else if found {
		if err := p.save(); err != nil {
			return 0, err
		}
	}
	total := 0
	for shard, it := range p.iterators {
		if it == nil {
			continue // closed shard
		}
		out, err := p.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		if err != nil {
			if ctx.Err() == nil {
				p.reposition(ctx, shard)
			}
			return total, fmt.Errorf("get records %s: %w", shard, err)
		}
		total += len(out.Records)
		var recs []events.DynamoDBEventRecord
		last := p.after[shard]
		for _, r := range out.Records {
			// Sequence numbers grow within a shard: what the checkpoint
			// covers was handled already.
			seq := aws.ToString(r.Dynamodb.SequenceNumber)
			if last != "" && seqNotAfter(seq, last) {
				continue
			}
			last = seq
			ev := ConvertRecord(r, p.StreamARN)
			if ok, err := p.matches(ev); err != nil {
				return total, err
			} else if ok {
				recs = append(recs, ev)
			}
		}
		size := max(p.Source.BatchSize, 1)
		for len(recs) > 0 {
			n := min(size, len(recs))
			if err := p.Deliver(ctx, shard, recs[:n]); err != nil {
				return total, err
			}
			if err := p.checkpoint(shard, recs[n-1].Change.SequenceNumber); err != nil {
				return total, err
			}
			recs = recs[n:]
		}
		// Only once delivered: a failure above reads the page again, and
		// the checkpoint passes over the batches it delivered.
		p.iterators[shard] = out.NextShardIterator
		if last != "" && last != p.after[shard] {
			// The records after the last batch were filtered out.
			if err := p.checkpoint(shard, last); err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// savedCheckpoint is a Checkpoint file: the stream it is of (a table made
// again has a new one, to which it says nothing) and each shard's last
// sequence number handled ("": none, the shard is read from its start).
type savedCheckpoint struct {
	StreamARN string            `json:"stream_arn"`
	Shards    map[string]string `json:"shards"`
}

// checkpoint moves shard's checkpoint to seq and saves it.
func (p *StreamPoller) checkpoint(shard, seq string) error {
	p.after[shard] = seq
	return p.save()
}

// save writes the checkpoint, with Checkpoint set, to a temporary file
// renamed over the last, so that a crash leaves the old checkpoint or the
// new one, never a mix.
func (p *StreamPoller) save() error {
	if p.Checkpoint == "" {
		return nil
	}
	raw, err := json.Marshal(savedCheckpoint{StreamARN: p.StreamARN, Shards: p.after})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p.Checkpoint), 0o750); err != nil {
		return fmt.Errorf("stream checkpoint: %w", err)
	}
	tmp := p.Checkpoint + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return fmt.Errorf("stream checkpoint: %w", err)
	}
	if err := os.Rename(tmp, p.Checkpoint); err != nil {
		return fmt.Errorf("stream checkpoint: %w", err)
	}
	return nil
}

// readCheckpoint reads the Checkpoint file's shards; none when there is no
// file or it is of another stream.
func (p *StreamPoller) readCheckpoint() (map[string]string, error) {
	if p.Checkpoint == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(p.Checkpoint)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream checkpoint: %w", err)
	}
	var c savedCheckpoint
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("stream checkpoint %s: %w", p.Checkpoint, err)
	}
	if c.StreamARN != p.StreamARN {
		p.log().Warn("stream checkpoint of another stream ignored", "file", p.Checkpoint, "stream", p.StreamARN, "checkpoint_of", c.StreamARN)
		return nil, nil
	}
	return c.Shards, nil
}

// seqNotAfter reports whether sequence number a is at or before b: longer
// is later, else the later string (they are decimal, without sign).
func seqNotAfter(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a <= b
}

func (p *StreamPoller) matches(ev events.DynamoDBEventRecord) (bool, error) {
	if len(p.patterns) == 0 {
		return true, nil
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		return false, err
	}
	for _, pat := range p.patterns {
		ok, err := pat.Match(raw)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// Deliver hands one batch (records of one shard, in order) to the handler
// with Lambda's retry, bisection and failure-destination rules. It returns
// an error only when the context ends or the failure destination cannot be
// written.
func (p *StreamPoller) Deliver(ctx context.Context, shard string, recs []events.DynamoDBEventRecord) error {
	attempts := 0
	for len(recs) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		failed, cause := p.invoke(ctx, recs)
		if failed < 0 {
			return nil
		}
		recs = recs[failed:]
		if p.Source.BisectBatchOnFunctionError && len(recs) > 1 {
			mid := len(recs) / 2
			if err := p.Deliver(ctx, shard, recs[:mid]); err != nil {
				return err
			}
			return p.Deliver(ctx, shard, recs[mid:])
		}
		attempts++
		if max := p.Source.MaximumRetryAttempts; max >= 0 && attempts > max {
			return p.fail(ctx, shard, recs, attempts, cause)
		}
		delay := p.RetryDelay
		if delay <= 0 {
			delay = 50 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
	return nil
}

// invoke runs the handler once: -1 when the whole batch succeeded, else the
// index of the first record to retry from, and why.
func (p *StreamPoller) invoke(ctx context.Context, recs []events.DynamoDBEventRecord) (int, string) {
	resp, err := p.Handler(ctx, events.DynamoDBEvent{Records: recs})
	if err != nil {
		return 0, err.Error()
	}
	if len(resp.BatchItemFailures) == 0 || !p.Source.ReportBatchItemFailures {
		return -1, ""
	}
	first := len(recs)
	for _, f := range resp.BatchItemFailures {
		i := indexOf(recs, f.ItemIdentifier)
		if i < 0 {
			return 0, fmt.Sprintf("the handler reported unknown sequence number %q: the whole batch failed", f.ItemIdentifier)
		}
		first = min(first, i)
	}
	return first, "the handler reported a batch item failure"
}

func indexOf(recs []events.DynamoDBEventRecord, seq string) int {
	for i, r := range recs {
		if r.Change.SequenceNumber == seq {
			return i
		}
	}
	return -1
}

// FailureRecord is what Lambda sends to a stream source's OnFailure
// destination: where the records are, not the records.
type FailureRecord struct {
	RequestContext struct {
		Condition              string `json:"condition"`
		ApproximateInvokeCount int    `json:"approximateInvokeCount"`
	} `json:"requestContext"`
	ResponseContext struct {
		FunctionError string `json:"functionError"`
	} `json:"responseContext"`
	Version   string `json:"version"`
	Timestamp string `json:"timestamp"`
	BatchInfo struct {
		ShardID                         string `json:"shardId"`
		StartSequenceNumber             string `json:"startSequenceNumber"`
		EndSequenceNumber               string `json:"endSequenceNumber"`
		ApproximateArrivalOfFirstRecord string `json:"approximateArrivalOfFirstRecord"`
		ApproximateArrivalOfLastRecord  string `json:"approximateArrivalOfLastRecord"`
		BatchSize                       int    `json:"batchSize"`
		StreamArn                       string `json:"streamArn"`
	} `json:"DDBStreamBatchInfo"`
}

func (p *StreamPoller) fail(ctx context.Context, shard string, recs []events.DynamoDBEventRecord, attempts int, cause string) error {
	var fr FailureRecord
	fr.RequestContext.Condition = "RetryAttemptsExhausted"
	fr.RequestContext.ApproximateInvokeCount = attempts
	fr.ResponseContext.FunctionError = cause
	fr.Version = "1.0"
	fr.Timestamp = time.Now().UTC().Format(time.RFC3339Nano)
	b := &fr.BatchInfo
	b.ShardID, b.StreamArn, b.BatchSize = shard, p.StreamARN, len(recs)
	b.StartSequenceNumber = recs[0].Change.SequenceNumber
	b.EndSequenceNumber = recs[len(recs)-1].Change.SequenceNumber
	b.ApproximateArrivalOfFirstRecord = recs[0].Change.ApproximateCreationDateTime.UTC().Format(time.RFC3339)
	b.ApproximateArrivalOfLastRecord = recs[len(recs)-1].Change.ApproximateCreationDateTime.UTC().Format(time.RFC3339)
	p.log().Error("stream records failed after retries; sent to the failure destination",
		"stream", p.StreamARN, "shard", shard, "first", b.StartSequenceNumber, "last", b.EndSequenceNumber, "cause", cause)
	if p.Failures == nil {
		return nil
	}
	body, err := json.Marshal(fr)
	if err != nil {
		return err
	}
	if _, err := p.Failures.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(p.FailureQueueURL), MessageBody: aws.String(string(body))}); err != nil {
		return fmt.Errorf("failure destination: %w", err)
	}
	return nil
}

func (p *StreamPoller) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.Default()
}

// ConvertRecord turns a DynamoDB Streams record into the record Lambda
// delivers (emulator.LambdaRecord).
func ConvertRecord(r stypes.Record, streamARN string) events.DynamoDBEventRecord {
	return emulator.LambdaRecord(r, streamARN)
}
