package iamcheck

import (
	"net/url"
	"path"
	"reflect"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// StreamLabel stands for every stream's label in a stream ARN
// (table/T/stream/<label>): the label is a timestamp of the table's
// creation, the template's !GetAtt T.StreamArn is the table's one stream.
const StreamLabel = "label"

// request is one IAM authorization a request needs.
type request struct{ action, resource string }

// requests are the authorizations one SDK request (service, operation and
// its input, and its output for the stream iterators) needs, named as l
// names resources. An operation not modelled here is one request with no
// resource.
func (r *Recorder) requests(l Local, service, op string, in, out any) []request {
	switch service {
	case "DynamoDB":
		return dynamoRequests(l, op, in)
	case "DynamoDB Streams":
		return r.streamRequests(l, op, in, out)
	case "SQS":
		// A batch is authorized as its single action
		// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-api-permissions-reference.html).
		action := "sqs:" + strings.TrimSuffix(op, "Batch")
		if u := stringField(in, "QueueUrl"); u != "" {
			return []request{{action, queueARN(l, u)}}
		}
		return []request{{action: action}}
	case "EventBridge":
		p, ok := in.(*eventbridge.PutEventsInput)
		if !ok {
			return []request{{action: "events:" + op}}
		}
		var reqs []request
		for _, e := range p.Entries {
			bus := aws.ToString(e.EventBusName)
			if bus == "" {
				bus = "default"
			}
			if i := strings.LastIndex(bus, "event-bus/"); i >= 0 {
				bus = bus[i+len("event-bus/"):]
			}
			reqs = append(reqs, request{"events:PutEvents", arn("events", "event-bus/"+l.logical(bus))})
		}
		return reqs
	case "Lambda":
		p, ok := in.(*lambda.InvokeInput)
		if !ok {
			return []request{{action: "lambda:" + op}}
		}
		return []request{{"lambda:InvokeFunction", functionARN(l, aws.ToString(p.FunctionName), aws.ToString(p.Qualifier))}}
	case "KMS":
		// Encrypt and Decrypt name the key (kmsseal always does): by id
		// locally, which Names maps to its logical id.
		if k := stringField(in, "KeyId"); k != "" {
			if i := strings.LastIndex(k, "key/"); i >= 0 {
				k = k[i+len("key/"):]
			}
			return []request{{"kms:" + op, arn("kms", "key/"+l.logical(k))}}
		}
		return []request{{action: "kms:" + op}}
	case "STS":
		if p, ok := in.(*sts.AssumeRoleInput); ok {
			return []request{{"sts:AssumeRole", aws.ToString(p.RoleArn)}}
		}
		return []request{{action: "sts:" + op}}
	}
	return []request{{action: strings.ToLower(strings.ReplaceAll(service, " ", "")) + ":" + op}}
}

func dynamoRequests(l Local, op string, in any) []request {
	table := func(name *string) string { return tableARN(l, aws.ToString(name)) }
	switch p := in.(type) {
	case *dynamodb.QueryInput:
		res := table(p.TableName)
		if p.IndexName != nil {
			res += "/index/" + *p.IndexName
		}
		return []request{{"dynamodb:Query", res}}
	case *dynamodb.ScanInput:
		res := table(p.TableName)
		if p.IndexName != nil {
			res += "/index/" + *p.IndexName
		}
		return []request{{"dynamodb:Scan", res}}
	case *dynamodb.BatchGetItemInput:
		var reqs []request
		for name := range p.RequestItems {
			reqs = append(reqs, request{"dynamodb:BatchGetItem", table(&name)})
		}
		return reqs
	case *dynamodb.BatchWriteItemInput:
		var reqs []request
		for name := range p.RequestItems {
			reqs = append(reqs, request{"dynamodb:BatchWriteItem", table(&name)})
		}
		return reqs
	case *dynamodb.TransactWriteItemsInput:
		// Each item's own action on its table: DynamoDB has no
		// TransactWriteItems action
		// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html).
		var reqs []request
		for _, it := range p.TransactItems {
			switch {
			case it.Put != nil:
				reqs = append(reqs, request{"dynamodb:PutItem", table(it.Put.TableName)})
			case it.Update != nil:
				reqs = append(reqs, request{"dynamodb:UpdateItem", table(it.Update.TableName)})
			case it.Delete != nil:
				reqs = append(reqs, request{"dynamodb:DeleteItem", table(it.Delete.TableName)})
			case it.ConditionCheck != nil:
				reqs = append(reqs, request{"dynamodb:ConditionCheckItem", table(it.ConditionCheck.TableName)})
			}
		}
		return reqs
	case *dynamodb.TransactGetItemsInput:
		var reqs []request
		for _, it := range p.TransactItems {
			if it.Get != nil {
				reqs = append(reqs, request{"dynamodb:GetItem", table(it.Get.TableName)})
			}
		}
		return reqs
	}
	// GetItem, PutItem, UpdateItem, DeleteItem, DescribeTable, ...: the
	// operation's own action on its table.
	if name := stringField(in, "TableName"); name != "" {
		return []request{{"dynamodb:" + op, tableARN(l, name)}}
	}
	return []request{{action: "dynamodb:" + op}}
}

// streamRequests: Streams' actions are DynamoDB's, on the stream's ARN.
func (r *Recorder) streamRequests(l Local, op string, in, out any) []request {
	action := "dynamodb:" + op
	switch p := in.(type) {
	case *dynamodbstreams.DescribeStreamInput:
		return []request{{action, streamARN(l, aws.ToString(p.StreamArn))}}
	case *dynamodbstreams.GetShardIteratorInput:
		stream := streamARN(l, aws.ToString(p.StreamArn))
		if o, ok := out.(*dynamodbstreams.GetShardIteratorOutput); ok && o != nil && o.ShardIterator != nil {
			r.mu.Lock()
			r.iterators[*o.ShardIterator] = stream
			r.mu.Unlock()
		}
		return []request{{action, stream}}
	case *dynamodbstreams.GetRecordsInput:
		r.mu.Lock()
		defer r.mu.Unlock()
		stream := r.iterators[aws.ToString(p.ShardIterator)]
		if o, ok := out.(*dynamodbstreams.GetRecordsOutput); ok && o != nil {
			// Used: the next one names the stream. A failed read keeps it,
			// since DynamoDB's iterators serve again (15 minutes).
			delete(r.iterators, aws.ToString(p.ShardIterator))
			if o.NextShardIterator != nil && stream != "" {
				r.iterators[*o.NextShardIterator] = stream
			}
		}
		return []request{{action, stream}}
	}
	return []request{{action: action}}
}

// tableARN is the ARN of a table given by name or ARN.
func tableARN(l Local, name string) string {
	if i := strings.Index(name, ":table/"); i >= 0 {
		name, _, _ = strings.Cut(name[i+len(":table/"):], "/")
	}
	if name == "" {
		return ""
	}
	return arn("dynamodb", "table/"+l.logical(name))
}

// streamARN is a stream's ARN with its table's logical id and StreamLabel.
func streamARN(l Local, s string) string {
	i := strings.Index(s, ":table/")
	if i < 0 {
		return ""
	}
	name, _, _ := strings.Cut(s[i+len(":table/"):], "/")
	return arn("dynamodb", "table/"+l.logical(name)+"/stream/"+StreamLabel)
}

// queueARN is the ARN of the queue at u (its last path segment is its
// name).
func queueARN(l Local, u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return arn("sqs", l.logical(path.Base(p.Path)))
}

// functionARN is the ARN Invoke authorizes for fn (a name, a name:qualifier,
// or an ARN) and qualifier: unqualified, the alias l records it as.
func functionARN(l Local, fn, qualifier string) string {
	if i := strings.Index(fn, "function:"); i >= 0 {
		fn = fn[i+len("function:"):]
	}
	name, q, _ := strings.Cut(fn, ":")
	if qualifier == "" {
		qualifier = q
	}
	if qualifier == "" {
		qualifier = l.Alias
	}
	res := "function:" + l.logical(name)
	if qualifier != "" {
		res += ":" + qualifier
	}
	return arn("lambda", res)
}

// stringField is in's *string field name ("" if it has none).
func stringField(in any, name string) string {
	v := reflect.ValueOf(in)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return ""
	}
	f := v.Elem().FieldByName(name)
	if !f.IsValid() || f.Type() != reflect.TypeOf((*string)(nil)) || f.IsNil() {
		return ""
	}
	return f.Elem().String()
}
