// Package awscost counts the AWS requests a piece of the service makes and
// prices them, for cost benchmarks: a Meter is SDK middleware added to an
// aws.Config (config.APIOptions), so every request of every client built
// from that configuration is counted by service and operation, with the
// DynamoDB capacity units it consumes, whatever code made it.
//
// The embedded emulator does not report consumed capacity, so units are
// computed from what the request and its answer carry, by DynamoDB's rules:
// a read costs one unit per 4 KB (rounded up, per item for GetItem, over the
// whole page for Query; at least one), half that when eventually
// consistent; a write costs one unit per 1 KB of the larger of the item
// before and after it, twice that inside a transaction. A put is counted
// by the item it carries (the one it may replace is not read); an update
// or a delete carries none, so a Meter told how to read items
// (SizeWith) reads each such item before and after the write, uncounted;
// without it an update or delete counts one unit, which is exact only for
// items under 1 KB.
package awscost

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
	"go.yaml.in/yaml/v3"
)

// Prices, us-east-1, as published on
// https://aws.amazon.com/dynamodb/pricing/on-demand/ (since November 2024),
// https://aws.amazon.com/dynamodb/pricing/provisioned/,
// https://aws.amazon.com/sqs/pricing/ (standard queue),
// https://aws.amazon.com/lambda/pricing/ (arm64, first 6 billion GB-s),
// https://aws.amazon.com/eventbridge/pricing/ (custom events; Scheduler).
const (
	PriceRRU             = 0.125 / 1e6 // per read request unit
	PriceWRU             = 0.625 / 1e6 // per write request unit
	PriceRCUHour         = 0.00013     // per provisioned read capacity unit-hour
	PriceWCUHour         = 0.00065     // per provisioned write capacity unit-hour
	PriceSQSRequest      = 0.40 / 1e6  // per request (64 KB chunk)
	PriceLambdaGBSecond  = 0.0000133334
	PriceLambdaRequest   = 0.20 / 1e6
	PriceEventBridge     = 1.00 / 1e6 // per custom event put
	PriceSchedulerInvoke = 1.00 / 1e6 // per EventBridge Scheduler invocation
	// https://aws.amazon.com/cloudwatch/pricing/: a standard-resolution
	// alarm metric (an alarm on one metric is one; a metric-math alarm
	// counts each metric it reads), and a dashboard, per month.
	PriceAlarmMonth     = 0.10
	PriceDashboardMonth = 3.00
	// PriceMetricMonth is a custom metric (each name and dimension
	// values an EMF line publishes) a month, the first 10,000 (the same
	// page, "Metrics").
	PriceMetricMonth = 0.30
	// PriceSecretMonth is a Secrets Manager secret a month
	// (https://aws.amazon.com/secrets-manager/pricing/).
	PriceSecretMonth = 0.40
	// PriceLogsGB is CloudWatch Logs' ingestion of a function's log
	// (standard class, per GB; the same page, "Logs"): every line a
	// function writes, its EMF metric lines included, is billed by size.
	PriceLogsGB = 0.50
	// PlatformLogBytes estimates what Lambda itself writes to a function's
	// log an invocation in its JSON log format: the platform.start and
	// platform.report records (their fields:
	// https://docs.aws.amazon.com/lambda/latest/dg/telemetry-schema-reference.html),
	// taken as about 250 and 450 bytes. An estimate, not a measurement.
	// Both are INFO records: at a SystemLogLevel of WARN (the template's)
	// Lambda sends neither for an invocation that succeeds
	// (https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-log-level.html).
	PlatformLogBytes = 700
	// HoursPerMonth is AWS's month for hourly prices.
	HoursPerMonth = 730

	// AWS IoT Core (https://aws.amazon.com/iot-core/pricing/): per minute
	// of connection, per message (of up to 5 KB; keep-alive pings are
	// free: https://aws.amazon.com/iot-core/pricing/additional-details/),
	// per rule triggered and per action executed by the rules engine.
	PriceIoTMinute  = 0.08 / 1e6
	PriceIoTMessage = 1.00 / 1e6
	PriceIoTRule    = 0.15 / 1e6
	PriceIoTAction  = 0.15 / 1e6
	// AWS KMS (https://aws.amazon.com/kms/pricing/): a request involving
	// an RSA 2048 key ($0.03 per 10,000, as a symmetric key's; other
	// asymmetric keys' are $0.15), and a key, per month. The free tier's
	// 20,000 requests a month are not deducted.
	PriceKMSRSA2048Request = 0.03 / 1e4
	PriceKMSKeyMonth       = 1.00

	// AWS X-Ray (https://aws.amazon.com/xray/pricing/): a trace recorded
	// (the free tier's 100,000 a month not deducted). A function with
	// active tracing has Lambda record its invocations by X-Ray's default
	// rule, the first each second and 5 % of the rest; the model assumes
	// that rule for each function
	// (https://docs.aws.amazon.com/lambda/latest/dg/services-xray.html).
	PriceXRayTrace         = 5.00 / 1e6
	XRayReservoirPerSecond = 1
	XRayFixedRate          = 0.05
)

// XRaySampled is the traces a second X-Ray's default rule records of a
// function invoked perSecond times a second, evenly.
func XRaySampled(perSecond float64) float64 {
	return min(perSecond, XRayReservoirPerSecond) + XRayFixedRate*max(0, perSecond-XRayReservoirPerSecond)
}

// Billed is the duration Lambda bills for one invocation that took d:
// rounded up to the millisecond (https://aws.amazon.com/lambda/pricing/),
// in seconds.
func Billed(d time.Duration) float64 {
	return math.Ceil(float64(d)/float64(time.Millisecond)) / 1000
}

// MemoryMB is the memory template.yaml gives function (a logical id): its
// own MemorySize, else Globals' (what Lambda duration is billed at).
func MemoryMB(template []byte, function string) (int, error) {
	v, err := setting(template, function, "MemorySize")
	if err != nil {
		return 0, err
	}
	if v == "" {
		return 0, fmt.Errorf("template gives %s no MemorySize", function)
	}
	return strconv.Atoi(v)
}

// SystemLogLevel is the LoggingConfig.SystemLogLevel template.yaml gives
// function; empty when none is set (Lambda's default, INFO).
func SystemLogLevel(template []byte, function string) (string, error) {
	return setting(template, function, "LoggingConfig", "SystemLogLevel")
}

// Tracing is the X-Ray tracing mode template.yaml gives function (Active
// or PassThrough, Lambda's default when none is set).
func Tracing(template []byte, function string) (string, error) {
	v, err := setting(template, function, "Tracing")
	if v == "" && err == nil {
		v = "PassThrough"
	}
	return v, err
}

// setting is the value at path of function's properties in template.yaml,
// else of Globals' Function, a Ref read as its parameter's default; empty
// when neither sets it.
func setting(template []byte, function string, path ...string) (string, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(template, &root); err != nil {
		return "", err
	}
	get := func(n *yaml.Node, path ...string) *yaml.Node {
		for _, key := range path {
			if n != nil && n.Kind == yaml.DocumentNode {
				n = n.Content[0]
			}
			if n == nil || n.Kind != yaml.MappingNode {
				return nil
			}
			var next *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == key {
					next = n.Content[i+1]
				}
			}
			n = next
		}
		return n
	}
	fn := get(&root, "Resources", function)
	if t := get(fn, "Type"); t == nil || t.Value != "AWS::Serverless::Function" {
		return "", fmt.Errorf("template has no function %s", function)
	}
	v := get(fn, append([]string{"Properties"}, path...)...)
	if v == nil {
		v = get(&root, append([]string{"Globals", "Function"}, path...)...)
	}
	if v != nil && v.Tag == "!Ref" {
		ref := v.Value
		if v = get(&root, "Parameters", ref, "Default"); v == nil {
			return "", fmt.Errorf("%s of %s: no parameter %s with a default", strings.Join(path, "."), function, ref)
		}
	}
	if v == nil {
		return "", nil
	}
	return v.Value, nil
}

// Usage is what a set of requests consumed.
type Usage struct {
	// Requests by "Service Operation" (e.g. "DynamoDB GetItem").
	Requests map[string]float64
	// RRU and WRU by "Service Operation".
	RRU, WRU map[string]float64
	// SQSRequests counts SQS requests; Events the entries put to
	// EventBridge.
	SQSRequests float64
	Events      float64
	// EmptyReceives are the SQS ReceiveMessage requests that returned no
	// message, Received the messages the others returned.
	EmptyReceives, Received float64
}

func newUsage() Usage {
	return Usage{Requests: map[string]float64{}, RRU: map[string]float64{}, WRU: map[string]float64{}}
}

// Add adds o to u.
func (u *Usage) Add(o Usage) {
	for k, v := range o.Requests {
		u.Requests[k] += v
	}
	for k, v := range o.RRU {
		u.RRU[k] += v
	}
	for k, v := range o.WRU {
		u.WRU[k] += v
	}
	u.SQSRequests += o.SQSRequests
	u.Events += o.Events
	u.EmptyReceives += o.EmptyReceives
	u.Received += o.Received
}

// TotalRRU and TotalWRU sum the units.
func (u Usage) TotalRRU() float64 { return sum(u.RRU) }

// TotalWRU sums the write units.
func (u Usage) TotalWRU() float64 { return sum(u.WRU) }

func sum(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// Ops lists the counted operations, sorted.
func (u Usage) Ops() []string {
	ops := make([]string, 0, len(u.Requests))
	for k := range u.Requests {
		ops = append(ops, k)
	}
	sort.Strings(ops)
	return ops
}

// Meter counts requests. Its zero value is not usable; use New.
type Meter struct {
	mu    sync.Mutex
	u     Usage
	sizer *dynamodb.Client
	keep  func(context.Context) bool
}

// Only has m count only the requests whose context keep accepts (one
// function's, in a configuration every function shares). Set before use.
func (m *Meter) Only(keep func(context.Context) bool) { m.keep = keep }

// SizeWith has m size the items an update or delete writes by reading them
// with db, a client m does not count, before and after the write. The
// reads add to the caller's wall time, so a benchmark that prices its
// duration should count writes this way only where they are few.
func (m *Meter) SizeWith(db *dynamodb.Client) { m.sizer = db }

// New returns a Meter counting nothing yet.
func New() *Meter { return &Meter{u: newUsage()} }

// Instrument returns a copy of cfg whose clients are counted by m.
func (m *Meter) Instrument(cfg aws.Config) aws.Config {
	cfg = cfg.Copy()
	cfg.APIOptions = append(cfg.APIOptions, func(st *middleware.Stack) error {
		// After the operation's metadata is in the context, around the
		// whole call (retries included, which are rare on the emulator).
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("awscost", m.handle), middleware.After)
	})
	return cfg
}

// Units returns the DynamoDB units counted so far (since the last Take),
// without starting afresh: a benchmark reads it each simulated second for
// the load's profile.
func (m *Meter) Units() (rru, wru float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.u.TotalRRU(), m.u.TotalWRU()
}

// Take returns what was counted since the last Take (or New) and starts
// afresh.
func (m *Meter) Take() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.u
	m.u = newUsage()
	return u
}

func (m *Meter) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	if m.keep != nil && !m.keep(ctx) {
		return next.HandleInitialize(ctx, in)
	}
	var before []int
	if m.sizer != nil {
		before = m.sizes(ctx, in.Parameters)
	}
	out, md, err := next.HandleInitialize(ctx, in)
	key := awsmiddleware.GetServiceID(ctx) + " " + awsmiddleware.GetOperationName(ctx)
	rru, wru := units(in.Parameters, out.Result)
	if before != nil {
		wru = sizedUnits(in.Parameters, before, m.sizes(ctx, in.Parameters))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.u.Requests[key]++
	if rru > 0 {
		m.u.RRU[key] += rru
	}
	if wru > 0 {
		m.u.WRU[key] += wru
	}
	if strings.HasPrefix(key, "SQS ") {
		m.u.SQSRequests++
	}
	if p, ok := in.Parameters.(*eventbridge.PutEventsInput); ok {
		m.u.Events += float64(len(p.Entries))
	}
	if r, ok := out.Result.(*sqs.ReceiveMessageOutput); ok && err == nil && r != nil {
		if len(r.Messages) == 0 {
			m.u.EmptyReceives++
		}
		m.u.Received += float64(len(r.Messages))
	}
	return out, md, err
}

// units computes the DynamoDB capacity of one request. A failed
// conditional write still consumes its write units; a transaction that is
// canceled consumes them too (DynamoDB charges the attempt).
func units(params, result any) (rru, wru float64) {
	read := func(bytes int, consistent *bool) float64 {
		u := math.Max(1, math.Ceil(float64(bytes)/4096))
		if !aws.ToBool(consistent) {
			u /= 2
		}
		return u
	}
	switch p := params.(type) {
	case *dynamodb.GetItemInput:
		size := 0
		if r, ok := result.(*dynamodb.GetItemOutput); ok && r != nil {
			size = ItemBytes(r.Item)
		}
		return read(size, p.ConsistentRead), 0
	case *dynamodb.QueryInput:
		size := 0
		if r, ok := result.(*dynamodb.QueryOutput); ok && r != nil {
			for _, it := range r.Items {
				size += ItemBytes(it)
			}
		}
		return read(size, p.ConsistentRead), 0
	case *dynamodb.BatchGetItemInput:
		if r, ok := result.(*dynamodb.BatchGetItemOutput); ok && r != nil {
			for t, items := range r.Responses {
				for _, it := range items {
					rru += read(ItemBytes(it), p.RequestItems[t].ConsistentRead)
				}
			}
		}
		return rru, 0
	case *dynamodb.PutItemInput:
		return 0, writeUnits(ItemBytes(p.Item))
	case *dynamodb.UpdateItemInput, *dynamodb.DeleteItemInput:
		return 0, 1
	case *dynamodb.BatchWriteItemInput:
		for _, reqs := range p.RequestItems {
			for _, r := range reqs {
				if r.PutRequest != nil {
					wru += writeUnits(ItemBytes(r.PutRequest.Item))
				} else {
					wru++
				}
			}
		}
		return 0, wru
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range p.TransactItems {
			if it.Put != nil {
				wru += 2 * writeUnits(ItemBytes(it.Put.Item))
			} else {
				wru += 2
			}
		}
		return 0, wru
	}
	return 0, 0
}

// writtenKeys lists the tables and keys of the items a write request
// names, in order; nil for any other request.
func writtenKeys(params any) (tables []string, keys []map[string]types.AttributeValue) {
	add := func(t *string, k map[string]types.AttributeValue) {
		tables, keys = append(tables, aws.ToString(t)), append(keys, k)
	}
	switch p := params.(type) {
	case *dynamodb.UpdateItemInput:
		add(p.TableName, p.Key)
	case *dynamodb.DeleteItemInput:
		add(p.TableName, p.Key)
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range p.TransactItems {
			switch {
			case it.Update != nil:
				add(it.Update.TableName, it.Update.Key)
			case it.Delete != nil:
				add(it.Delete.TableName, it.Delete.Key)
			default:
				add(nil, nil) // a put carries its item; a check writes none
			}
		}
	}
	return tables, keys
}

// sizes reads the size of each item a write names (0 where none is read).
func (m *Meter) sizes(ctx context.Context, params any) []int {
	tables, keys := writtenKeys(params)
	if keys == nil {
		return nil
	}
	out := make([]int, len(keys))
	for i, k := range keys {
		if k == nil {
			continue
		}
		r, err := m.sizer.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tables[i]), Key: k, ConsistentRead: aws.Bool(true)})
		if err == nil && r != nil {
			out[i] = ItemBytes(r.Item)
		}
	}
	return out
}

// sizedUnits is units' write count for an update, a delete or a
// transaction whose items were read before and after.
func sizedUnits(params any, before, after []int) float64 {
	larger := func(i int) int {
		if i < len(after) {
			return max(before[i], after[i])
		}
		return before[i]
	}
	switch p := params.(type) {
	case *dynamodb.UpdateItemInput, *dynamodb.DeleteItemInput:
		return writeUnits(larger(0))
	case *dynamodb.TransactWriteItemsInput:
		wru := 0.0
		for i, it := range p.TransactItems {
			switch {
			case it.Put != nil:
				wru += 2 * writeUnits(ItemBytes(it.Put.Item))
			case it.Update != nil, it.Delete != nil:
				wru += 2 * writeUnits(larger(i))
			default:
				wru += 2
			}
		}
		return wru
	}
	_, wru := units(params, nil)
	return wru
}

func writeUnits(bytes int) float64 { return math.Max(1, math.Ceil(float64(bytes)/1024)) }

// ItemBytes is DynamoDB's size of an item: attribute names plus values.
func ItemBytes(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueBytes(v)
	}
	return n
}

func valueBytes(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberN:
		return len(strings.TrimLeft(x.Value, "-0"))/2 + 1
	case *types.AttributeValueMemberB:
		return len(x.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range x.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range x.Value {
			n += len(k) + valueBytes(e) + 1
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range x.Value {
			n += valueBytes(e) + 1
		}
		return n
	}
	return 0
}

// Lambda is one function's measured use: invocations and the billed
// duration (each invocation rounded up to the millisecond) at its memory.
type Lambda struct {
	Invocations float64
	Seconds     float64
	MemoryMB    int
	// LogBytes is what the function's code wrote to its log (measured);
	// Lambda's own records, PlatformLogBytes an invocation, are added
	// when it is priced, unless SystemLogLevel is WARN.
	LogBytes float64
	// SystemLogLevel is the function's LoggingConfig.SystemLogLevel
	// (empty: Lambda's default, INFO).
	SystemLogLevel string
}

// PlatformBytes is what Lambda itself writes to the function's log: its
// platform.start and platform.report records of each invocation, none at
// WARN (failed invocations' records, at WARN, are not counted).
func (l Lambda) PlatformBytes() float64 {
	if l.SystemLogLevel == "WARN" {
		return 0
	}
	return l.Invocations * PlatformLogBytes
}

// TotalLogBytes is the function's log: its code's lines and Lambda's
// records of each invocation.
func (l Lambda) TotalLogBytes() float64 { return l.LogBytes + l.PlatformBytes() }

// GBSeconds is what Lambda bills for duration.
func (l Lambda) GBSeconds() float64 { return l.Seconds * float64(l.MemoryMB) / 1024 }

// Cost is a bill, by item, in dollars. IoT and KMS are the presence
// channel's (IoT Core's own charges; the agents' token signatures).
type Cost struct {
	Reads, Writes, SQS, LambdaRequests, LambdaDuration, EventBridge, IoT, KMS float64
	// Logs is the functions' CloudWatch Logs ingestion.
	Logs float64
}

// Total is the sum of the items.
func (c Cost) Total() float64 {
	return c.Reads + c.Writes + c.SQS + c.LambdaRequests + c.LambdaDuration + c.EventBridge + c.IoT + c.KMS + c.Logs
}

// Scale multiplies every item by f.
func (c Cost) Scale(f float64) Cost {
	return Cost{c.Reads * f, c.Writes * f, c.SQS * f, c.LambdaRequests * f, c.LambdaDuration * f, c.EventBridge * f, c.IoT * f, c.KMS * f, c.Logs * f}
}

// Add is the sum of c and o, item by item.
func (c Cost) Add(o Cost) Cost {
	return Cost{c.Reads + o.Reads, c.Writes + o.Writes, c.SQS + o.SQS, c.LambdaRequests + o.LambdaRequests,
		c.LambdaDuration + o.LambdaDuration, c.EventBridge + o.EventBridge, c.IoT + o.IoT, c.KMS + o.KMS, c.Logs + o.Logs}
}

// Price prices u, the Lambda functions' use and schedule invocations.
func Price(u Usage, fns []Lambda, scheduleInvocations float64) Cost {
	c := Cost{
		Reads:       u.TotalRRU() * PriceRRU,
		Writes:      u.TotalWRU() * PriceWRU,
		SQS:         u.SQSRequests * PriceSQSRequest,
		EventBridge: u.Events*PriceEventBridge + scheduleInvocations*PriceSchedulerInvoke,
		KMS:         u.Requests["KMS Sign"] * PriceKMSRSA2048Request,
	}
	for _, f := range fns {
		c.LambdaRequests += f.Invocations * PriceLambdaRequest
		c.LambdaDuration += f.GBSeconds() * PriceLambdaGBSecond
		c.Logs += f.TotalLogBytes() / 1e9 * PriceLogsGB
	}
	return c
}

// Provisioned is c with DynamoDB priced as provisioned capacity that auto
// scaling keeps at target use (0.7 for 70 %) instead of on demand: a load of
// n units a second holds n/target units of capacity, so every unit consumed
// costs 1/(target·3600) of a capacity-hour. That holds for a load that is
// steady over auto scaling's minutes and above the capacity's minimum (a
// fixed cost, not priced here); a benchmark shows the load's profile.
func (c Cost) Provisioned(u Usage, target float64) Cost {
	c.Reads = u.TotalRRU() / (target * 3600) * PriceRCUHour
	c.Writes = u.TotalWRU() / (target * 3600) * PriceWCUHour
	return c
}

// String formats the bill.
func (c Cost) String() string {
	return fmt.Sprintf("reads $%.2f, writes $%.2f, SQS $%.2f, Lambda $%.2f + $%.2f, EventBridge $%.2f, IoT Core $%.2f, KMS $%.2f, logs $%.2f: $%.2f",
		c.Reads, c.Writes, c.SQS, c.LambdaRequests, c.LambdaDuration, c.EventBridge, c.IoT, c.KMS, c.Logs, c.Total())
}
