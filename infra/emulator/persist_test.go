package emulator_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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

func runChild(t *testing.T, mode, dataDir string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, emulator.DataDirEnv+"="+dataDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child %s: %v\n%s", mode, err, out)
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
