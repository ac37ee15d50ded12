package awscost

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"spaces"
)

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// TestUnits: DynamoDB's capacity rules as the meter applies them.
func TestUnits(t *testing.T) {
	small := map[string]types.AttributeValue{"pk": s("ORG#a"), "sk": s("SPACE#b")}
	big := map[string]types.AttributeValue{"pk": s("x"), "blob": s(strings.Repeat("x", 5000))}
	tx := &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{}}, {Put: &types.Put{Item: big}}}}
	for _, c := range []struct {
		name     string
		params   any
		result   any
		rru, wru float64
	}{
		{"strong GetItem", &dynamodb.GetItemInput{ConsistentRead: aws.Bool(true)}, &dynamodb.GetItemOutput{Item: small}, 1, 0},
		{"eventually consistent GetItem", &dynamodb.GetItemInput{}, &dynamodb.GetItemOutput{Item: small}, 0.5, 0},
		{"GetItem of nothing", &dynamodb.GetItemInput{ConsistentRead: aws.Bool(true)}, &dynamodb.GetItemOutput{}, 1, 0},
		{"GetItem of 5 KB", &dynamodb.GetItemInput{ConsistentRead: aws.Bool(true)}, &dynamodb.GetItemOutput{Item: big}, 2, 0},
		// A Query rounds the page's total, not each item.
		{"Query of two small items", &dynamodb.QueryInput{}, &dynamodb.QueryOutput{Items: []map[string]types.AttributeValue{small, small}}, 0.5, 0},
		{"UpdateItem", &dynamodb.UpdateItemInput{}, nil, 0, 1},
		{"PutItem of 5 KB", &dynamodb.PutItemInput{Item: big}, nil, 0, 5},
		{"transaction", tx, nil, 0, 2 + 2*5},
		{"SQS", &struct{}{}, nil, 0, 0},
	} {
		rru, wru := units(c.params, c.result)
		if math.Abs(rru-c.rru) > 1e-9 || math.Abs(wru-c.wru) > 1e-9 {
			t.Errorf("%s: %v RRU %v WRU, want %v and %v", c.name, rru, wru, c.rru, c.wru)
		}
	}
}

// TestPrice: a bill from known usage.
func TestPrice(t *testing.T) {
	u := newUsage()
	u.RRU["DynamoDB GetItem"] = 1e6
	u.WRU["DynamoDB UpdateItem"] = 1e6
	u.SQSRequests = 1e6
	u.Events = 1e6
	// A million invocations writing 1 GB of their own lines, and Lambda's
	// records of each (PlatformLogBytes).
	c := Price(u, []Lambda{{Invocations: 1e6, Seconds: 1024, MemoryMB: 512, LogBytes: 1e9}}, 0)
	want := Cost{Reads: 0.125, Writes: 0.625, SQS: 0.40, LambdaRequests: 0.20, LambdaDuration: 512 * PriceLambdaGBSecond, EventBridge: 1,
		Logs: (1e9 + 1e6*PlatformLogBytes) / 1e9 * PriceLogsGB}
	if math.Abs(c.Total()-want.Total()) > 1e-9 || math.Abs(c.Reads-want.Reads) > 1e-12 || math.Abs(c.LambdaDuration-want.LambdaDuration) > 1e-12 ||
		math.Abs(c.Logs-want.Logs) > 1e-12 {
		t.Errorf("bill %+v, want %+v", c, want)
	}
	// At a SystemLogLevel of WARN, Lambda writes no record of an
	// invocation that succeeds: the log is the code's lines alone.
	warn := Price(u, []Lambda{{Invocations: 1e6, Seconds: 1024, MemoryMB: 512, LogBytes: 1e9, SystemLogLevel: "WARN"}}, 0)
	if math.Abs(warn.Logs-PriceLogsGB) > 1e-12 {
		t.Errorf("logs at WARN $%v, want $%v (1 GB of the code's lines)", warn.Logs, PriceLogsGB)
	}
}

// TestProvisioned: 0.7 × 3600 units consumed hold one unit of capacity for
// an hour at a 70 % target.
func TestProvisioned(t *testing.T) {
	u := newUsage()
	u.RRU["DynamoDB GetItem"] = 0.7 * 3600
	u.WRU["DynamoDB UpdateItem"] = 2 * 0.7 * 3600
	u.SQSRequests = 1e6
	c := Price(u, nil, 0).Provisioned(u, 0.7)
	if math.Abs(c.Reads-PriceRCUHour) > 1e-12 || math.Abs(c.Writes-2*PriceWCUHour) > 1e-12 || math.Abs(c.SQS-0.40) > 1e-12 {
		t.Errorf("bill %+v, want reads %v, writes %v and SQS unchanged", c, PriceRCUHour, 2*PriceWCUHour)
	}
}

// TestMeterCountsReceives: every SQS request is counted as sent, and a
// receive's answer says whether it was empty and how many messages it
// brought (what an event source's long polls cost).
func TestMeterCountsReceives(t *testing.T) {
	answers := []string{`{}`, `{"Messages":[{"MessageId":"a","Body":"x"},{"MessageId":"b","Body":"y"}]}`, `{}`}
	var served int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(answers[served%len(answers)]))
		served++
	}))
	defer srv.Close()
	m := New()
	cfg := m.Instrument(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")})
	c := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	for range answers {
		if _, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(srv.URL + "/q")}); err != nil {
			t.Fatal(err)
		}
	}
	u := m.Take()
	if u.SQSRequests != 3 || u.Requests["SQS ReceiveMessage"] != 3 || u.EmptyReceives != 2 || u.Received != 2 {
		t.Errorf("counted %+v; want 3 receives, 2 of them empty, 2 messages", u)
	}
}

// TestMemoryMB: a function's own MemorySize, else Globals'; a name that
// is no function is an error, not Lambda's default.
func TestMemoryMB(t *testing.T) {
	tmpl := []byte(`
Globals:
  Function:
    MemorySize: 256
Resources:
  Own:
    Type: AWS::Serverless::Function
    Properties: {MemorySize: 128}
  Global:
    Type: AWS::Serverless::Function
    Properties: {Timeout: 5}
  Queue:
    Type: AWS::SQS::Queue
`)
	for fn, want := range map[string]int{"Own": 128, "Global": 256} {
		if got, err := MemoryMB(tmpl, fn); err != nil || got != want {
			t.Errorf("MemoryMB(%s) = %d, %v; want %d", fn, got, err, want)
		}
	}
	for _, fn := range []string{"Queue", "Missing"} {
		if _, err := MemoryMB(tmpl, fn); err == nil {
			t.Errorf("MemoryMB(%s): no error", fn)
		}
	}
}

// TestBilled: Lambda bills each invocation rounded up to the millisecond.
func TestBilled(t *testing.T) {
	for d, want := range map[time.Duration]float64{0: 0, time.Microsecond: 0.001, time.Millisecond: 0.001, 1001 * time.Microsecond: 0.002} {
		if got := Billed(d); math.Abs(got-want) > 1e-12 {
			t.Errorf("Billed(%v) = %v, want %v", d, got, want)
		}
	}
}

// TestXRaySampled: the default rule records every invocation up to one a
// second, and 5 % of the rest.
func TestXRaySampled(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{{0, 0}, {0.5, 0.5}, {1, 1}, {21, 2}, {341, 18}} {
		if got := XRaySampled(c.in); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("XRaySampled(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestSystemLogLevel: the template's functions log Lambda's own records at
// its SystemLogLevel parameter's default, WARN, through Globals.
func TestSystemLogLevel(t *testing.T) {
	for _, fn := range []string{"ProberFunction", "AgentFunction", "PresenceFunction"} {
		got, err := SystemLogLevel(spaces.Template, fn)
		if err != nil || got != "WARN" {
			t.Errorf("SystemLogLevel(%s) = %q, %v; want WARN", fn, got, err)
		}
	}
	if _, err := SystemLogLevel(spaces.Template, "NoSuchFunction"); err == nil {
		t.Error("SystemLogLevel of a function the template lacks: no error")
	}
}

// TestFunctionSettings: a function's own setting, else Globals', a Ref
// read as its parameter's default: the prober's 128 MB and ProbeTracing
// (PassThrough), the scheduler's Globals 256 MB, the API's Globals Active.
func TestFunctionSettings(t *testing.T) {
	for fn, want := range map[string]int{"ProberFunction": 128, "SchedulerFunction": 256} {
		if got, err := MemoryMB(spaces.Template, fn); err != nil || got != want {
			t.Errorf("MemoryMB(%s) = %d, %v; want %d", fn, got, err, want)
		}
	}
	for fn, want := range map[string]string{"ProberFunction": "PassThrough", "SchedulerFunction": "PassThrough", "ApiFunction": "Active"} {
		if got, err := Tracing(spaces.Template, fn); err != nil || got != want {
			t.Errorf("Tracing(%s) = %q, %v; want %q", fn, got, err, want)
		}
	}
}
