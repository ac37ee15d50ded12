// Command local runs the whole Spaces service on this machine: `make run`.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"spaces/infra/demo"
	"spaces/infra/local"
	"spaces/shared/config"
	"spaces/shared/space"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := configure()
	if err != nil {
		fmt.Fprintln(os.Stderr, "spaces:", err)
		os.Exit(2)
	}
	cfg.Log = log
	st, err := local.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "spaces: cannot start:", err)
		os.Exit(1)
	}
	token, err := st.Signer.Mint("acme", "dev", nil, 12*time.Hour)
	if err != nil {
		fmt.Fprintln(os.Stderr, "spaces: cannot mint a token:", err)
		os.Exit(1)
	}
	fmt.Print(banner(st, cfg, token))
	select {
	case <-ctx.Done():
	case err := <-st.Err():
		log.Error("listener stopped", "error", err)
	}
	fmt.Println("\nstopping…")
	st.Close()
}

// configure reads the environment once.
func configure() (local.Config, error) {
	env := config.FromOS()
	cfg := local.Config{APIAddr: env.String("SPACES_ADDR", ""), EmulatorAddr: env.String("SPACES_EMULATOR_ADDR", ""), Persist: true}
	on := true
	if v := env.String("SPACES_DEMO", ""); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("configuration: SPACES_DEMO=%q is not 1 or 0", v)
		}
		on = b
	}
	if on {
		cfg.Demo = &demo.Options{
			FlapUp:   env.Duration("SPACES_DEMO_FLAP_UP", demo.DefaultFlapUp),
			FlapDown: env.Duration("SPACES_DEMO_FLAP_DOWN", demo.DefaultFlapDown),
		}
	}
	return cfg, env.Err()
}

// dataLine says where the stack's data lives and what it cleaned up.
func dataLine(st *local.Stack) string {
	if st.DataDir == "" {
		return "in memory only (KUMO_DATA_DIR is not set): lost when this stops"
	}
	line := st.DataDir + " (written before each answer; stop, then delete .local/ to start empty)"
	if n := len(st.Leftovers); n > 0 {
		line += fmt.Sprintf("\n                removed %d tables, queues and buses that earlier test runs had left there", n)
	}
	return line
}

func banner(st *local.Stack, cfg local.Config, token string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `
Spaces is running.

  API           %[1]s   (OpenAPI: %[1]s/openapi.yaml)
  Console       %[1]s/   (development sign-in for any org)
  AWS emulator  %[2]s   (aws --endpoint-url %[2]s dynamodb scan --table-name SpacesTable)
  data          %[4]s

A token for org "acme", valid 12 hours (more with: make -s token ORG=<org> [SCOPE=spaces:internal]):

  export API=%[1]s
  export TOKEN=%[3]s
`, st.APIURL, st.PublicURL, token, dataLine(st))
	if st.Demo == nil {
		b.WriteString(`
The demo is off (SPACES_DEMO=0): no cloud is reachable, so registrations are
not checked against a cloud and every probe fails with CredentialsUnavailable.

Try:

  curl -s -H "Authorization: Bearer $TOKEN" $API/spaces

Stop with Ctrl-C.
`)
		return b.String()
	}
	b.WriteString("\nDemo clusters in a simulated cloud (nothing is registered until you register it):\n")
	for _, p := range []space.Provider{space.AWS, space.GCP, space.Azure} {
		conn, _ := json.Marshal(demo.Connection(p))
		fmt.Fprintf(&b, "\n  %-6s connection %s\n", p, conn)
		for _, c := range st.Demo.Clusters {
			if c.Provider != p {
				continue
			}
			note := ""
			if c.Flaps {
				note = fmt.Sprintf("   flaps: up %s, down %s, over and over", cfg.Demo.FlapUp, cfg.Demo.FlapDown)
			}
			fmt.Fprintf(&b, "         %-11s %-13s %s%s\n", c.Name, c.Location, c.GitVersion, note)
		}
	}
	awsConn, _ := json.Marshal(demo.Connection(space.AWS))
	fmt.Fprintf(&b, `
Try (README.md, "A five-minute tour", walks through all of it):

  # connect the demo AWS account, then pick from the clusters it can see
  ACCOUNT=$(curl -s -X POST $API/cloud-accounts -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' \
    -d '{"provider":"aws","name":"demo","connection":%s}' | jq -r .id)
  curl -s "$API/cloud-accounts/$ACCOUNT/clusters?region=%s" -H "Authorization: Bearer $TOKEN" | jq

  # register one (POST /spaces with a config from the list), then watch it
  curl -s $API/spaces -H "Authorization: Bearer $TOKEN" | jq '.items[] | {id, name, status}'

Stop with Ctrl-C.
`, awsConn, demo.AWSRegion)
	return b.String()
}
