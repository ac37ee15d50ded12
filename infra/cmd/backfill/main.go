// Command backfill gives the spaces and revisions of a table that held data
// before the listing indexes ("names", "registered", "status", "since",
// "env-revisions", "stopped-revisions") the key attributes those indexes
// need, and counts the spaces stored before the version counters of
// GET /space-counts under their Kubernetes version, and gives them their
// names' search entries and their labels' entries (dynamostore.Backfill
// says how, and why it is safe beside the live service). Run it once after the first deploy that adds them, with the
// deployer's AWS credentials:
//
//	go run ./infra/cmd/backfill -table <the stack's SpacesTableName output>
//
// It reads the whole table once, in parallel segments (a Scan costs half a
// read unit per 4 KB read), and prints what it wrote.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"golang.org/x/sync/errgroup"

	"spaces/shared/dynamostore"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, nil); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "backfill:", err)
		}
		os.Exit(2)
	}
}

// run backfills the table named by args through db (nil: a client from the
// default credential chain; tests pass the emulator's).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, db *dynamodb.Client) error {
	fs := flag.NewFlagSet("backfill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	table := fs.String("table", "", "the spaces table's name (required)")
	segments := fs.Int("segments", 4, "parallel scan segments, 1-64: more is faster and takes more read capacity at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *table == "" || *segments < 1 || *segments > 64 || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("-table is required and -segments must be 1-64")
	}
	if db == nil {
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return err
		}
		db = dynamodb.NewFromConfig(cfg)
	}
	store := dynamostore.New(db, *table)
	reports := make([]dynamostore.BackfillReport, *segments)
	g, gctx := errgroup.WithContext(ctx)
	for seg := range *segments {
		g.Go(func() (err error) {
			reports[seg], err = store.Backfill(gctx, seg, *segments)
			return err
		})
	}
	err := g.Wait()
	var total dynamostore.BackfillReport
	for _, r := range reports {
		total.Add(r)
	}
	fmt.Fprintf(stdout, "%s: scanned %d items; gave %d spaces and %d revisions their listing keys, counted %d spaces under their Kubernetes version, gave %d spaces their name's search entries, %d their labels' entries and %d those in problems-first order (%d after a race with a live write)\n",
		*table, total.Scanned, total.Spaces, total.Revisions, total.Counted, total.Words, total.Labels, total.Ordered, total.Retried)
	return err
}
