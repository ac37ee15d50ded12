// Command local runs the whole Spaces service on this machine: `make run`.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
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
	"spaces/shared/tracing"
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
	// OTEL_TRACES_EXPORTER=stdout [SPACES_TRACES_FILE=path]: every span.
	if cfg.Tracing, err = tracing.FromEnv(os.LookupEnv); err != nil {
		fmt.Fprintln(os.Stderr, "spaces:", err)
		os.Exit(2)
	}
	defer cfg.Tracing.Close(context.Background())
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
	if st.Demo != nil {
		// The simulated cloud's console (the customer's side of the tour)
		// speaks HTTPS with its own CA: curl --cacert takes this file.
		if err := os.WriteFile(simcloudCA, st.Demo.Cloud.CAPEM, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "spaces: cannot write the simulated cloud's CA:", err)
			os.Exit(1)
		}
		// Its port changes at every start: the tour reads it from here
		// (export SIMCLOUD=$(cat .local/simcloud-url)).
		if err := os.WriteFile(simcloudURL, []byte(st.Demo.Cloud.URL+"\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "spaces: cannot write the simulated cloud's URL:", err)
			os.Exit(1)
		}
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

// simcloudCA is where make run leaves the simulated cloud's CA.
const simcloudCA = ".local/simcloud-ca.pem"

// simcloudURL is where make run leaves the simulated cloud's address.
const simcloudURL = ".local/simcloud-url"

// checkAddr refuses an API address other than loopback unless the caller
// opted in: the development sign-in mints a token for any org to whoever
// reaches it, so on a network address anyone there would be any org.
func checkAddr(addr string, optIn bool) error {
	if addr == "" || optIn {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("configuration: SPACES_ADDR=%q is not host:port", addr)
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("configuration: SPACES_ADDR=%q is not a loopback address, and the development sign-in would mint tokens for any org to anyone who reaches it; set SPACES_ALLOW_REMOTE_SIGNIN=1 to serve it there anyway", addr)
}

// remoteWarning is the banner's line for a sign-in served beyond loopback
// (SPACES_ALLOW_REMOTE_SIGNIN=1).
func remoteWarning(addr string) string {
	if checkAddr(addr, false) == nil {
		return ""
	}
	return "  WARNING       the API listens on " + addr + ", beyond loopback: anyone who reaches it can sign in as any org\n"
}

// configure reads the environment once.
func configure() (local.Config, error) {
	env := config.FromOS()
	cfg := local.Config{APIAddr: env.String("SPACES_ADDR", ""), EmulatorAddr: env.String("SPACES_EMULATOR_ADDR", ""), Persist: true,
		// Fixed, so that manifests rendered by make agent-image (whose
		// SPACES_AGENT_URL defaults to it) reach it across restarts.
		AgentAddr: env.String("SPACES_AGENT_ADDR", "127.0.0.1:8081")}
	if err := checkAddr(cfg.APIAddr, env.String("SPACES_ALLOW_REMOTE_SIGNIN", "") == "1"); err != nil {
		return cfg, err
	}
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
			// How long a cluster the simulated cloud creates takes to come up.
			CreateDelay: env.Duration("SPACES_DEMO_CREATE_DELAY", demo.DefaultCreateDelay),
			// The simulated customers' trust survives restarts, like the
			// accounts in the table.
			SetupsFile: ".local/demo-setups.jsonl",
			// So do the clusters it created, and what the real API
			// server holds.
			CreatedFile: ".local/demo-created.jsonl",
			KubeDir:     ".local/kube",
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
  Agent routes  %[6]s   (AgentFunction's function URL: in-cluster agents call out here)
%[5]s  AWS emulator  %[2]s   (aws --endpoint-url %[2]s dynamodb scan --table-name SpacesTable)
  data          %[4]s

A token for org "acme", valid 12 hours (more with: make -s token ORG=<org> [SCOPE=spaces:internal]):

  export API=%[1]s
  export TOKEN=%[3]s
`, st.APIURL, st.PublicURL, token, dataLine(st), remoteWarning(cfg.APIAddr), st.AgentURL)
	if st.Demo == nil {
		b.WriteString(`
The demo is off (SPACES_DEMO=0): no cloud is reachable, so cloud accounts
stay pending (verify answers 503), nothing new can be registered, and every
probe fails with CredentialsUnavailable.

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
			note := "   light: /version and namespaces only, revisions fail"
			switch {
			case c.Real:
				note = "   real kube-apiserver: takes revisions"
			case c.Flaps:
				note += fmt.Sprintf("; flaps: up %s, down %s, over and over", cfg.Demo.FlapUp, cfg.Demo.FlapDown)
			}
			fmt.Fprintf(&b, "         %-13s %-13s %-19s%s\n", c.Name, c.Location, c.GitVersion, note)
		}
	}
	if st.Demo.Real != nil {
		fmt.Fprintf(&b, "\nClusters the simulated cloud creates come up after %s (EKS: twice, control plane then nodes),\n"+
			"on the real kube-apiserver: they take revisions.\n", cfg.Demo.CreateDelay)
		b.WriteString("Agent mode: register demo-eks-apps with \"connectivity\":\"agent\" and POST the answer to\n" +
			"$SIMCLOUD/console/install-agent: the demo installs the agent on the real kube-apiserver and runs it\n" +
			"in this process (docs/tour.md, \"A private cluster, through the agent\").\n")
	} else {
		fmt.Fprintf(&b, "\nNo demo cluster takes revisions: %s.\n"+
			"Clusters the simulated cloud creates are light too. Build the real API server once, then restart.\n", st.Demo.RealMissing)
	}
	awsConn, _ := json.Marshal(demo.Connection(space.AWS))
	fmt.Fprintf(&b, `
The simulated cloud's console, where you play the customer (apply an
account's setup), is at %[3]s (CA in %[4]s):

  export SIMCLOUD=%[3]s

Try (docs/tour.md walks through all of it; README.md has a five-minute tour):

  # connect the demo AWS account: pending, with the external id Spaces
  # generated and the trust policy for the role
  curl -s -X POST $API/cloud-accounts -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' \
    -d '{"provider":"aws","name":"demo","connection":%[1]s}' > account.json
  jq '{id, status, setup}' account.json
  ACCOUNT=$(jq -r .id account.json)

  # as the customer, put the trust policy on the role; then verify
  curl -s --cacert %[4]s -X POST $SIMCLOUD/console/apply-setup -d @account.json
  curl -s -X POST $API/cloud-accounts/$ACCOUNT/verify -H "Authorization: Bearer $TOKEN" | jq '{status, verified_at}'

  # pick from the clusters it can see
  curl -s "$API/cloud-accounts/$ACCOUNT/clusters?region=%[2]s" -H "Authorization: Bearer $TOKEN" | jq

  # register one (POST /spaces with a config from the list), then watch it
  curl -s $API/spaces -H "Authorization: Bearer $TOKEN" | jq '.items[] | {id, name, status}'

  # or provision a new cluster and watch the job (docs/tour.md, "Provision a new cluster")
  curl -s -X POST $API/provisioning-jobs -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"provider":"aws","cloud_account_id":"'$ACCOUNT'","config":{"clusterName":"tour-eks","region":"%[2]s"},"spec":{"kubernetes_version":"1.31","node_pool":{"machine_type":"m5.large","min_nodes":1,"max_nodes":3,"desired_nodes":2},"network":{"subnet_ids":["%[5]s","%[6]s"],"security_group_ids":["%[7]s"]}}}' | jq '{id, state}'
  curl -s $API/provisioning-jobs -H "Authorization: Bearer $TOKEN" | jq '.items[] | {id, state, space_id, failure}'

Stop with Ctrl-C.
`, awsConn, demo.AWSRegion, st.Demo.Cloud.URL, simcloudCA, demo.AWSSubnetA, demo.AWSSubnetB, demo.AWSSecurityGroup)
	return b.String()
}
