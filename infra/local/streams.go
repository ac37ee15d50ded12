package local

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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
// source's StartingPosition, then GetRecords), converts the records into
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
//     queue and moves on.
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
	Log        *slog.Logger

	patterns  []*eventfilter.Pattern
	iterators map[string]*string // shard id → next iterator
	// after is each shard's checkpoint, as Lambda keeps one: the sequence
	// number of the last record handled (delivered or filtered out).
	after map[string]string
}

// Start compiles the filter and positions an iterator on every shard at the
// source's StartingPosition. Records written after Start returns are seen
// (with LATEST).
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
	if p.Source.StartingPosition != string(stypes.ShardIteratorTypeLatest) {
		return p.discover(ctx, p.Source.StartingPosition)
	}
	// LATEST, with a checkpoint: what the shards hold now is read and
	// passed over, so that a lost iterator can be replaced from the
	// checkpoint rather than from a later LATEST, which would skip what
	// came meanwhile.
	if err := p.discover(ctx, string(stypes.ShardIteratorTypeTrimHorizon)); err != nil {
		return err
	}
	for shard, it := range p.iterators {
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
	}
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

// discover adds an iterator for every shard not known yet; shards found
// after the start are read from their beginning.
func (p *StreamPoller) discover(ctx context.Context, position string) error {
	out, err := p.Streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(p.StreamARN)})
	if err != nil {
		return fmt.Errorf("describe stream: %w", err)
	}
	for _, sh := range out.StreamDescription.Shards {
		id := aws.ToString(sh.ShardId)
		if _, ok := p.iterators[id]; ok {
			continue
		}
		it, err := p.Streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: aws.String(p.StreamARN), ShardId: sh.ShardId, ShardIteratorType: stypes.ShardIteratorType(position),
		})
		if err != nil {
			return fmt.Errorf("shard iterator %s: %w", id, err)
		}
		p.iterators[id] = it.ShardIterator
	}
	return nil
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
	if err := p.discover(ctx, string(stypes.ShardIteratorTypeTrimHorizon)); err != nil {
		return 0, err
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
			recs = recs[n:]
		}
		// Only once delivered: a crash (or ctx end) above re-reads nothing,
		// as this poller keeps its position in memory only.
		p.iterators[shard] = out.NextShardIterator
		if last != "" {
			p.after[shard] = last
		}
	}
	return total, nil
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
