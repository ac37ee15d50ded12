package iamcheck_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces"
	"spaces/infra/iamcheck"
	"spaces/infra/lambdarules"
)

const record = "testdata/calls.txt"

func readRecord(t *testing.T) []iamcheck.Call {
	t.Helper()
	calls, err := iamcheck.ReadRecord(record)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) == 0 {
		t.Fatalf("%s records no call: run go test ./infra/local -iam.update", record)
	}
	return calls
}

func read(t *testing.T, template []byte) iamcheck.Policies {
	t.Helper()
	p, err := iamcheck.Read(template)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRecordedCallsAreGranted: every call infra/local's tests recorded is
// allowed by its function's role in template.yaml.
func TestRecordedCallsAreGranted(t *testing.T) {
	for _, p := range read(t, spaces.Template).Denied(readRecord(t)) {
		t.Error(p)
	}
}

// TestEveryGrantIsUsed: every action and resource a function's role grants
// is used by a recorded call, or its statement says why not ("# iam:").
func TestEveryGrantIsUsed(t *testing.T) {
	for _, p := range read(t, spaces.Template).Unused(readRecord(t)) {
		t.Error(p)
	}
}

// TestEveryFunctionIsRecorded: each function that makes AWS requests
// itself made some in infra/local's tests (the console serves files only).
func TestEveryFunctionIsRecorded(t *testing.T) {
	p := read(t, spaces.Template)
	seen := map[string]bool{}
	for _, c := range readRecord(t) {
		seen[c.Function] = true
	}
	for fn := range p.Roles {
		if !seen[fn] && fn != "ConsoleFunction" {
			t.Errorf("%s made no recorded call", fn)
		}
	}
}

// TestRemovedGrantIsFound: taking one recorded action out of a role makes
// the recorded calls that need it denied; a grant added with no use is
// found unused.
func TestRemovedGrantIsFound(t *testing.T) {
	calls := readRecord(t)
	// CascadeFunction's table statement, without DeleteItem (the grant's).
	const from = "                Action: [dynamodb:GetItem, dynamodb:Query, dynamodb:UpdateItem, dynamodb:DeleteItem, dynamodb:PutItem]\n                Resource: !GetAtt SpacesTable.Arn"
	if bytes.Count(spaces.Template, []byte(from)) != 1 {
		t.Fatalf("template.yaml has no single %q", from)
	}
	fewer := bytes.Replace(spaces.Template, []byte(from), []byte(strings.Replace(from, " dynamodb:DeleteItem,", "", 1)), 1)
	denied := read(t, fewer).Denied(calls)
	want := "CascadeFunction dynamodb:DeleteItem arn:aws:dynamodb:us-east-1:000000000000:table/SpacesTable: CascadeFunction's role CascadeFunctionRole does not allow it; grant it in template.yaml"
	if !slices.Contains(denied, want) {
		t.Errorf("without the grant, denied %q; want %q among them", denied, want)
	}

	more := bytes.Replace(spaces.Template, []byte(from), []byte(strings.Replace(from, "dynamodb:PutItem]", "dynamodb:PutItem, dynamodb:BatchWriteItem]", 1)), 1)
	unused := read(t, more).Unused(calls)
	if !slices.ContainsFunc(unused, func(s string) bool {
		return strings.HasPrefix(s, "CascadeFunctionRole CascadeWrites: dynamodb:BatchWriteItem on arn:aws:dynamodb:us-east-1:000000000000:table/SpacesTable is granted and no recorded call uses it")
	}) {
		t.Errorf("a grant of BatchWriteItem with no use: unused %q", unused)
	}
}

// TestJustifications: an "# iam:" comment excuses the actions it names on
// the statement right below it; one that names an action the statement
// does not grant, gives no reason, or stands elsewhere is refused.
func TestJustifications(t *testing.T) {
	const role = `Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Role: !GetAtt FnRole.Arn
  Q:
    Type: AWS::SQS::Queue
  FnRole:
    Type: AWS::IAM::Role
    Properties:
      Policies:
        - PolicyDocument:
            Statement:
              # Reads the queue.
%s              - Sid: Source
                Effect: Allow
                Action: [sqs:ReceiveMessage, sqs:GetQueueAttributes]
                Resource: !GetAtt Q.Arn
`
	tpl := func(comment string) []byte { return []byte(strings.Replace(role, "%s", comment, 1)) }
	recv := []iamcheck.Call{{Function: "Fn", Action: "sqs:ReceiveMessage", Resource: "arn:aws:sqs:us-east-1:000000000000:Q"}}

	p := read(t, tpl("              # iam: sqs:GetQueueAttributes: Lambda's mapping reads\n              # the queue's attributes.\n"))
	if u := p.Unused(recv); len(u) != 0 {
		t.Errorf("justified: unused %q", u)
	}
	if got := p.Statements["FnRole"][0].Justified["sqs:GetQueueAttributes"]; got != "Lambda's mapping reads the queue's attributes." {
		t.Errorf("the reason read is %q", got)
	}
	if u := p.Unused(append(recv, iamcheck.Call{Function: "Fn", Action: "sqs:GetQueueAttributes", Resource: recv[0].Resource})); len(u) != 1 || !strings.Contains(u[0], "is used, yet") {
		t.Errorf("a justified action that is used: %q", u)
	}
	if u := read(t, tpl("")).Unused(recv); len(u) != 1 || !strings.Contains(u[0], "sqs:GetQueueAttributes on arn:aws:sqs:us-east-1:000000000000:Q is granted and no recorded call uses it") {
		t.Errorf("unjustified: unused %q", u)
	}
	for _, bad := range []string{
		"              # iam: sqs:SendMessage: not granted here.\n",
		"              # iam: sqs:GetQueueAttributes:\n",
		"              # iam: GetQueueAttributes: not an action.\n",
		"              # iam: sqs:GetQueueAttributes: far from its statement.\n\n",
	} {
		if _, err := iamcheck.Read(tpl(bad)); err == nil {
			t.Errorf("%q is accepted", bad)
		}
	}
}

// TestRecorder: the middleware records each request made in a function's
// context as IAM authorizes it (a transaction as its items' actions, a
// Query of an index on the index), under the logical names, whether or
// not the request succeeds; a request outside any function is not
// recorded.
func TestRecorder(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ValidationException","message":"no"}`))
	}))
	defer srv.Close()
	rec := iamcheck.NewRecorder()
	l, err := iamcheck.ForStack(spaces.Template)
	if err != nil {
		t.Fatal(err)
	}
	l.Names["t1-SpacesTable"] = "SpacesTable"
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
		BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1}
	cfg.APIOptions = append(cfg.APIOptions, rec.APIOption(l))
	db := dynamodb.NewFromConfig(cfg)
	ctx := lambdarules.WithFunction(context.Background(), "ApiFunction")
	table := aws.String("t1-SpacesTable")
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}}
	_, _ = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: table, Item: key}},
		{ConditionCheck: &types.ConditionCheck{TableName: table, Key: key, ConditionExpression: aws.String("attribute_exists(pk)")}}}})
	_, _ = db.Query(ctx, &dynamodb.QueryInput{TableName: table, IndexName: aws.String("names")})
	_, _ = db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: table, Key: key})
	const arn = "arn:aws:dynamodb:us-east-1:000000000000:table/SpacesTable"
	want := []iamcheck.Call{
		{Function: "ApiFunction", Action: "dynamodb:ConditionCheckItem", Resource: arn},
		{Function: "ApiFunction", Action: "dynamodb:PutItem", Resource: arn},
		{Function: "ApiFunction", Action: "dynamodb:Query", Resource: arn + "/index/names"},
	}
	if got := rec.Calls(); !slices.Equal(got, want) {
		t.Errorf("recorded %v, want %v", got, want)
	}
}

// TestIoTDataCalls: the data plane's Publish and DeleteConnection, made in
// a function's context, are recorded as iot:Publish on the topic and
// iot:DeleteConnection on the client, a space id in either as
// SpaceIDMark; a request outside any function's context is not recorded.
func TestIoTDataCalls(t *testing.T) {
	r := iamcheck.NewRecorder()
	rt := r.IoTData(roundTrip(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	}))
	ctx := lambdarules.WithFunction(t.Context(), "CascadeFunction")
	for _, req := range []struct{ method, path string }{
		{http.MethodPost, "/topics/spaces%2Fspaces_a%2Fwake?qos=1"},
		{http.MethodDelete, "/connections/spaces_a?cleanSession=true"},
		{http.MethodDelete, "/connections/spaces_62d9de27-02db-404d-8964-a4b558e0f8ec"},
	} {
		q, err := http.NewRequestWithContext(ctx, req.method, "https://iot.example"+req.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.RoundTrip(q); err != nil {
			t.Fatal(err)
		}
	}
	q, _ := http.NewRequestWithContext(t.Context(), http.MethodDelete, "https://iot.example/connections/spaces_b", nil)
	if _, err := rt.RoundTrip(q); err != nil {
		t.Fatal(err)
	}
	got := r.Calls()
	want := []iamcheck.Call{
		{Function: "CascadeFunction", Action: "iot:DeleteConnection", Resource: "arn:aws:iot:us-east-1:000000000000:client/spaces_a"},
		{Function: "CascadeFunction", Action: "iot:DeleteConnection", Resource: "arn:aws:iot:us-east-1:000000000000:client/spaces_" + iamcheck.SpaceIDMark},
		{Function: "CascadeFunction", Action: "iot:Publish", Resource: "arn:aws:iot:us-east-1:000000000000:topic/spaces/spaces_a/wake"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("recorded %v, want %v", got, want)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
