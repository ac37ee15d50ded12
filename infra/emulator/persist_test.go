package emulator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"spaces"
	"spaces/infra/emulator"
	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
)

// childEnv turns the test binary into a child that works the emulator the
// way tests do (see TestMain), in a process whose environment names a data
// folder.
const childEnv = "SPACES_TEST_EMULATOR_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "test":
		// The emulator as every test starts it.
		emu, err := emulator.Start(context.Background())
		exitOn(err)
		exitOn(work(emu))
		// Past kumo's background flush interval (1 s): anything it would
		// write is written by now.
		time.Sleep(1500 * time.Millisecond)
	case "leftovers":
		exitOn(leftovers())
	case "first", "second":
		exitOn(restartWork(os.Getenv(childEnv)))
	case "persist":
		// The local stack's emulator: every acknowledged write on disk.
		emu, err := emulator.StartWith(context.Background(), emulator.Options{Persist: true})
		exitOn(err)
		exitOn(emu.Check(context.Background()))
		exitOn(work(emu))
	}
	os.Exit(0)
}

func exitOn(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
}

// work creates the template's resources, writes an item and sends a message.
func work(emu *emulator.Emulator) error {
	ctx := context.Background()
	res, err := emu.CreateResources(ctx, spaces.Template, func(id string) string { return "child-" + id })
	if err != nil {
		return err
	}
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	if _, err := awsclient.DynamoDB(emu.Config(), emu.URL).PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(res["SpacesTable"].Name), Item: map[string]ddbtypes.AttributeValue{"pk": s("ORG#child"), "sk": s("X#1")},
	}); err != nil {
		return err
	}
	_, err = awsclient.SQS(emu.Config(), emu.URL).SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(res["ProbeQueue"].URL), MessageBody: aws.String("{}"),
	})
	return err
}

// leftovers plants what an old test run and a developer left in a data
// folder, removes the test leftovers and checks what is kept.
func leftovers() error {
	ctx := context.Background()
	emu, err := emulator.StartWith(ctx, emulator.Options{Persist: true})
	if err != nil {
		return err
	}
	own, err := emu.CreateResources(ctx, spaces.Template, nil) // the local stack's own
	if err != nil {
		return err
	}
	for _, prefix := range []string{"TestOld-0a1b2c3d-", "t61251-"} { // emulatortest's and infra/local's test names
		if _, err := emu.CreateResources(ctx, spaces.Template, func(id string) string { return prefix + id }); err != nil {
			return err
		}
	}
	sq := awsclient.SQS(emu.Config(), emu.URL)
	if _, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders")}); err != nil {
		return err
	}
	removed, err := emu.RemoveTestLeftovers(ctx, spaces.Template)
	if err != nil {
		return err
	}
	if len(removed) != 2*len(own) {
		return fmt.Errorf("removed %d (%v), want %d", len(removed), removed, 2*len(own))
	}
	// A second start finds nothing more to remove; the stack's own
	// resources and the developer's queue are still there.
	if again, err := emu.RemoveTestLeftovers(ctx, spaces.Template); err != nil || len(again) != 0 {
		return fmt.Errorf("second pass removed %v (%v)", again, err)
	}
	if _, err := emu.CreateResources(ctx, spaces.Template, nil); err != nil {
		return fmt.Errorf("the stack's own resources: %w", err)
	}
	if _, err := sq.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("orders")}); err != nil {
		return fmt.Errorf("the developer's queue is gone: %w", err)
	}
	return nil
}

func runChild(t *testing.T, mode, dataDir string) []byte {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, emulator.DataDirEnv+"="+dataDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child %s: %v\n%s%s", mode, err, out, stderr.Bytes())
	}
	return out
}

// TestStreamRecordsAndInFlightMessagesSurviveARestart: what a persisting
// emulator acknowledged is there when it starts again on its data, as in
// AWS: the table's stream records (with their sequence numbers, numbering
// going on after them, so that a consumer's checkpoint still names the
// same record) and a message that was in flight, which comes back once its
// visibility timeout ends.
func TestStreamRecordsAndInFlightMessagesSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	type seen struct{ Records, Messages []string }
	var first, second seen
	if err := json.Unmarshal(runChild(t, "first", dir), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(runChild(t, "second", dir), &second); err != nil {
		t.Fatal(err)
	}
	if len(first.Records) != 3 || len(first.Messages) != 1 {
		t.Fatalf("the first life saw %+v", first)
	}
	if len(second.Records) != 4 || fmt.Sprint(second.Records[:3]) != fmt.Sprint(first.Records) {
		t.Fatalf("stream after the restart: %v; want %v and one more", second.Records, first.Records)
	}
	seq := func(r string) string { _, s, _ := strings.Cut(r, "@"); return s }
	if last, prev := seq(second.Records[3]), seq(first.Records[2]); len(last) != len(prev) || last <= prev {
		t.Errorf("the record written after the restart is numbered %s, not after %s", last, prev)
	}
	if fmt.Sprint(second.Messages) != "[in flight]" {
		t.Errorf("after the restart the queue gave %v; want the message that was in flight", second.Messages)
	}
}

// TestTestsNeverWriteTheDataFolder: a test process whose environment names
// a data folder (a developer's KUMO_DATA_DIR exported in their shell) leaves
// it untouched; only the local stack persists.
func TestTestsNeverWriteTheDataFolder(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "developer-data.json")
	if err := os.WriteFile(marker, []byte(`{"keep":"me"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	runChild(t, "test", dir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "developer-data.json" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the test process wrote the data folder: it holds %v", names)
	}

	// The same work in a persisting emulator does write it, so the folder
	// staying untouched above is not an accident of the setup.
	persisted := t.TempDir()
	runChild(t, "persist", persisted)
	if _, err := os.Stat(filepath.Join(persisted, "dynamodb.json")); err != nil {
		t.Errorf("a persisting emulator wrote nothing: %v", err)
	}
}

// TestLocalStackRemovesTestLeftovers: resources that earlier test runs
// persisted are removed; the stack's own and a developer's are kept.
func TestLocalStackRemovesTestLeftovers(t *testing.T) {
	runChild(t, "leftovers", t.TempDir())
}

// TestCheckPassesOnThePatchedEmulator: the local stack's start-up check
// finds transaction stream records on the emulator make test runs.
func TestCheckPassesOnThePatchedEmulator(t *testing.T) {
	env := emulatortest.Start(t)
	if err := env.Emulator.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// restartWork is one life of a persisting emulator in a child process:
// the first writes three items and receives a message (leaving it in
// flight), the second reads what the first left. Each prints what it saw
// as JSON.
func restartWork(life string) error {
	ctx := context.Background()
	emu, err := emulator.StartWith(ctx, emulator.Options{Persist: true})
	if err != nil {
		return err
	}
	res, err := emu.CreateResources(ctx, spaces.Template, func(id string) string { return "child-" + id })
	if err != nil {
		return err
	}
	db, sq := awsclient.DynamoDB(emu.Config(), emu.URL), awsclient.SQS(emu.Config(), emu.URL)
	streams := emulator.Streams(emu.Config(), emu.URL)
	table, queue := res["SpacesTable"], res["ProbeQueue"].URL
	put := func(sk string) error {
		s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table.Name), Item: map[string]ddbtypes.AttributeValue{"pk": s("ORG#child"), "sk": s(sk)}})
		return err
	}
	var seen struct {
		Records  []string // "sk@sequence number", from the stream's start
		Messages []string // bodies received
	}
	read := func() error {
		seen.Records = nil
		d, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(table.StreamARN)})
		if err != nil {
			return err
		}
		for _, sh := range d.StreamDescription.Shards {
			it, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(table.StreamARN),
				ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				return err
			}
			for next := it.ShardIterator; next != nil; {
				out, err := streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: next})
				if err != nil {
					return err
				}
				for _, r := range out.Records {
					sk := r.Dynamodb.Keys["sk"].(*streamtypes.AttributeValueMemberS).Value
					seen.Records = append(seen.Records, sk+"@"+aws.ToString(r.Dynamodb.SequenceNumber))
				}
				if len(out.Records) == 0 {
					break
				}
				next = out.NextShardIterator
			}
		}
		return nil
	}
	switch life {
	case "first":
		for _, sk := range []string{"X#1", "X#2", "X#3"} {
			if err := put(sk); err != nil {
				return err
			}
		}
		if _, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queue), MessageBody: aws.String("in flight")}); err != nil {
			return err
		}
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue), VisibilityTimeout: 2})
		if err != nil || len(out.Messages) != 1 {
			return fmt.Errorf("receive: %v %v", out, err)
		}
		seen.Messages = append(seen.Messages, aws.ToString(out.Messages[0].Body))
	case "second":
		if err := put("X#4"); err != nil {
			return err
		}
		// Back once its visibility timeout ends, as in SQS.
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue), WaitTimeSeconds: 10})
		if err != nil {
			return err
		}
		for _, m := range out.Messages {
			seen.Messages = append(seen.Messages, aws.ToString(m.Body))
		}
	}
	if err := read(); err != nil {
		return err
	}
	// Ended without Close, as a kill ends it: only what each answer
	// waited for is on disk.
	return json.NewEncoder(os.Stdout).Encode(seen)
}
