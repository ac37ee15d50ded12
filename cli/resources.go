package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"spaces/client"
)

func group(use, short, example string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Example: example, Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() }}
	c.AddCommand(subs...)
	return c
}

// ---- cloud accounts ----

var accountHead = []string{"ID", "NAME", "PROVIDER", "STATUS", "AGE"}

func accountRow(c client.CloudAccount) []string {
	return []string{c.Id.String(), c.Name, string(c.Provider), string(c.Status), age(c.CreatedAt)}
}

func accountsCmd(a *app) *cobra.Command {
	return group("accounts", "Cloud accounts: connect, verify, list", `  spaces accounts connect --provider aws --name prod --connection roleArn=arn:aws:iam::123456789012:role/spaces
  spaces accounts verify 0b8f6f7c-2f3a-4d1e-8c9b-7a6e5d4c3b2a
  spaces accounts list`,
		accountsConnectCmd(a), accountsVerifyCmd(a), accountsListCmd(a))
}

func accountsConnectCmd(a *app) *cobra.Command {
	var provider, name string
	var conn []string
	cmd := &cobra.Command{
		Use:   "connect",
		Short: "Connect a cloud account (pending until verified)",
		Long: `Connect a cloud account. It is pending until its trust is set up in the
cloud and verified: the answer's setup says what to create there (the role's
trust policy, the federated credential, the IAM binding); then run
'spaces accounts verify'.`,
		Example: `  # AWS: the role Spaces assumes
  spaces accounts connect --provider aws --name prod --connection roleArn=arn:aws:iam::123456789012:role/spaces -o yaml

  # GCP: the project and the service account Spaces impersonates
  spaces accounts connect --provider gcp --name prod --connection projectId=acme-prod --connection serviceAccountEmail=spaces@acme-prod.iam.gserviceaccount.com`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "name", "connection"); err != nil {
				return err
			}
			c, err := keyValues("connection", conn)
			if err != nil {
				return err
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			raw, _ := json.Marshal(map[string]any{"provider": provider, "name": name, "connection": c})
			r, err := client.Result(api.CreateCloudAccountWithBodyWithResponse(cmd.Context(), nil, "application/json", bytes.NewReader(raw)))
			if err != nil {
				return err
			}
			acct := r.JSON201
			if err := a.print(cmd.OutOrStdout(), acct, accountHead, func(add func(...string)) { add(accountRow(*acct)...) }); err != nil {
				return err
			}
			if a.output == "table" && acct.Setup != nil {
				fmt.Fprintln(cmd.OutOrStdout(), "\nSet up the trust in the cloud, then run: spaces accounts verify "+acct.Id.String())
				for i, s := range acct.Setup.Steps {
					fmt.Fprintf(cmd.OutOrStdout(), "  %d. %s\n", i+1, s)
				}
				if acct.Setup.TrustPolicy != nil {
					raw, _ := json.MarshalIndent(acct.Setup.TrustPolicy, "  ", "  ")
					fmt.Fprintf(cmd.OutOrStdout(), "Trust policy:\n  %s\n", raw)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&provider, "provider", "aws", "the cloud: aws, gcp or azure")
	f.StringVar(&name, "name", "", "the account's display name")
	f.StringArrayVar(&conn, "connection", nil, "how Spaces reaches the account, key=value, repeated (aws: roleArn; gcp: projectId, serviceAccountEmail; azure: tenantId, clientId, subscriptionId)")
	_ = cmd.RegisterFlagCompletionFunc("provider", cobra.FixedCompletions([]string{"aws", "gcp", "azure"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func accountsVerifyCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "verify ACCOUNT_ID",
		Short:   "Check an account's trust in its cloud; ready when it works",
		Example: `  spaces accounts verify 0b8f6f7c-2f3a-4d1e-8c9b-7a6e5d4c3b2a`,
		Args:    exactArgs(1, "one cloud account id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			r, err := client.Result(api.VerifyCloudAccountWithResponse(cmd.Context(), args[0], nil))
			if err != nil {
				return err
			}
			acct := r.JSON200
			if err := a.print(cmd.OutOrStdout(), acct, append(accountHead, "MESSAGE"), func(add func(...string)) {
				add(append(accountRow(*acct), str(acct.StatusMessage))...)
			}); err != nil {
				return err
			}
			if acct.Status != client.CloudAccountStatusReady {
				return fmt.Errorf("account %s is %s: %s", acct.Id, acct.Status, str(acct.StatusMessage))
			}
			return nil
		},
	}
}

func accountsListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the org's cloud accounts",
		Example: `  spaces accounts list -o json`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			items := []client.CloudAccount{}
			p := client.ListCloudAccountsParams{}
			for {
				r, err := client.Result(api.ListCloudAccountsWithResponse(cmd.Context(), &p))
				if err != nil {
					return err
				}
				items = append(items, r.JSON200.Items...)
				if p.Cursor = r.JSON200.NextCursor; p.Cursor == nil {
					break
				}
			}
			return a.print(cmd.OutOrStdout(), items, accountHead, func(add func(...string)) {
				for _, c := range items {
					add(accountRow(c)...)
				}
			})
		},
	}
}

// ---- clusters ----

func clustersCmd(a *app) *cobra.Command {
	var account, region string
	list := &cobra.Command{
		Use:   "list --account ACCOUNT_ID",
		Short: "List the clusters a cloud account can see, and which are registered",
		Example: `  spaces clusters list --account 0b8f6f7c-2f3a-4d1e-8c9b-7a6e5d4c3b2a --region eu-west-1
  # Register the first one not yet registered
  spaces clusters list --account 0b8f… -o json | jq '[.[] | select(.registered_space_id == null)][0].config'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "account"); err != nil {
				return err
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			p := client.ListCloudAccountClustersParams{}
			if region != "" {
				p.Region = &region
			}
			r, err := client.Result(api.ListCloudAccountClustersWithResponse(cmd.Context(), account, &p))
			if err != nil {
				return err
			}
			items := r.JSON200.Items
			return a.print(cmd.OutOrStdout(), items, []string{"NAME", "LOCATION", "STATUS", "CONFIG", "SPACE"}, func(add func(...string)) {
				for _, c := range items {
					cfg, _ := c.Config.MarshalJSON()
					space := ""
					if c.RegisteredSpaceId != nil {
						space = c.RegisteredSpaceId.String()
					}
					add(c.Name, c.Location, str(c.Status), string(cfg), space)
				}
			})
		},
	}
	list.Flags().StringVar(&account, "account", "", "the cloud account's id")
	list.Flags().StringVar(&region, "region", "", "the region to look in (AWS)")
	return group("clusters", "Clusters a cloud account can see", `  spaces clusters list --account 0b8f6f7c-2f3a-4d1e-8c9b-7a6e5d4c3b2a --region eu-west-1`, list)
}

// ---- environments ----

var envHead = []string{"ID", "NAME", "SPACE", "NAMESPACE", "GATED", "AGE"}

func envRow(e client.Environment) []string {
	gated := "no"
	if e.Gate != nil {
		gated = "yes"
	}
	return []string{e.Id.String(), e.Name, e.SpaceId.String(), e.Namespace, gated, age(e.CreatedAt)}
}

func environmentsCmd(a *app) *cobra.Command {
	var space, name, namespace string
	create := &cobra.Command{
		Use:     "create --space SPACE_ID --name NAME",
		Short:   "Create an environment bound to a space",
		Example: `  spaces environments create --space 6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11 --name web-prod --namespace web`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "space", "name"); err != nil {
				return err
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			body := map[string]any{"space_id": space, "name": name}
			if namespace != "" {
				body["namespace"] = namespace
			}
			raw, _ := json.Marshal(body)
			r, err := client.Result(api.CreateEnvironmentWithBodyWithResponse(cmd.Context(), nil, "application/json", bytes.NewReader(raw)))
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), r.JSON201, envHead, func(add func(...string)) { add(envRow(*r.JSON201)...) })
		},
	}
	create.Flags().StringVar(&space, "space", "", "the space's id")
	create.Flags().StringVar(&name, "name", "", "the environment's name")
	create.Flags().StringVar(&namespace, "namespace", "", "the namespace its revisions go to (default the name)")
	list := &cobra.Command{
		Use:     "list",
		Short:   "List environments",
		Example: `  spaces environments list`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			items := []client.Environment{}
			p := client.ListEnvironmentsParams{}
			for {
				r, err := client.Result(api.ListEnvironmentsWithResponse(cmd.Context(), &p))
				if err != nil {
					return err
				}
				items = append(items, r.JSON200.Items...)
				if p.Cursor = r.JSON200.NextCursor; p.Cursor == nil {
					break
				}
			}
			return a.print(cmd.OutOrStdout(), items, envHead, func(add func(...string)) {
				for _, e := range items {
					add(envRow(e)...)
				}
			})
		},
	}
	get := &cobra.Command{
		Use:     "get ENVIRONMENT_ID",
		Short:   "Show one environment",
		Example: `  spaces environments get 9d2e… -o yaml`,
		Args:    exactArgs(1, "one environment id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			r, err := client.Result(api.GetEnvironmentWithResponse(cmd.Context(), args[0], nil))
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), r.JSON200, envHead, func(add func(...string)) { add(envRow(*r.JSON200)...) })
		},
	}
	return group("environments", "Environments bound to spaces", `  spaces environments create --space 6f1c… --name web-prod
  spaces environments list`, create, list, get)
}

// ---- revisions ----

var revisionHead = []string{"ID", "ENVIRONMENT", "STATE", "ATTEMPTS", "OBJECTS", "REASON", "AGE"}

// revisionRow: a listing's summary does not carry the manifests.
func revisionRow(r client.RevisionSummary) []string {
	return []string{r.Id.String(), r.EnvironmentId.String(), string(r.State), strconv.Itoa(r.Attempts), "", str(r.Reason), age(r.CreatedAt)}
}

func revisionsCmd(a *app) *cobra.Command {
	var file string
	push := &cobra.Command{
		Use:   "push ENVIRONMENT_ID -f MANIFESTS",
		Short: "Push manifests to an environment as a new revision",
		Long: `Push Kubernetes manifests (a YAML stream of documents, or a JSON list) to
an environment: a new revision, pending until it is applied with
server-side apply to the environment's space and namespace.`,
		Example: `  spaces revisions push 9d2e… -f app.yaml
  kustomize build overlays/prod | spaces revisions push 9d2e… -f -`,
		Args: exactArgs(1, "one environment id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "filename"); err != nil {
				return err
			}
			manifests, err := readManifests(cmd, file)
			if err != nil {
				return err
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			raw, _ := json.Marshal(map[string]any{"manifests": manifests})
			r, err := client.Result(api.PushRevisionWithBodyWithResponse(cmd.Context(), args[0], nil, "application/json", bytes.NewReader(raw)))
			if err != nil {
				return err
			}
			rev := r.JSON202
			return a.print(cmd.OutOrStdout(), rev, revisionHead, func(add func(...string)) {
				add(rev.Id.String(), rev.EnvironmentId.String(), string(rev.State), strconv.Itoa(rev.Attempts), strconv.Itoa(len(rev.Manifests)), str(rev.Reason), age(rev.CreatedAt))
			})
		},
	}
	push.Flags().StringVarP(&file, "filename", "f", "", "the manifests ('-' reads standard input)")
	list := &cobra.Command{
		Use:     "list ENVIRONMENT_ID",
		Short:   "List an environment's revisions, newest first",
		Example: `  spaces revisions list 9d2e…`,
		Args:    exactArgs(1, "one environment id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			items := []client.RevisionSummary{}
			p := client.ListEnvironmentRevisionsParams{}
			for {
				r, err := client.Result(api.ListEnvironmentRevisionsWithResponse(cmd.Context(), args[0], &p))
				if err != nil {
					return err
				}
				items = append(items, r.JSON200.Items...)
				if p.Cursor = r.JSON200.NextCursor; p.Cursor == nil {
					break
				}
			}
			return a.print(cmd.OutOrStdout(), items, revisionHead, func(add func(...string)) {
				for _, r := range items {
					add(revisionRow(r)...)
				}
			})
		},
	}
	get := &cobra.Command{
		Use:     "get REVISION_ID",
		Short:   "Show one revision, its manifests and state",
		Example: `  spaces revisions get 7c1b… -o yaml`,
		Args:    exactArgs(1, "one revision id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			r, err := client.Result(api.GetRevisionWithResponse(cmd.Context(), args[0], nil))
			if err != nil {
				return err
			}
			rev := r.JSON200
			return a.print(cmd.OutOrStdout(), rev, revisionHead, func(add func(...string)) {
				add(rev.Id.String(), rev.EnvironmentId.String(), string(rev.State), strconv.Itoa(rev.Attempts), strconv.Itoa(len(rev.Manifests)), str(rev.Reason), age(rev.CreatedAt))
			})
		},
	}
	return group("revisions", "Deployment revisions: push, list, get", `  spaces revisions push 9d2e… -f app.yaml
  spaces revisions list 9d2e…`, push, list, get)
}

// readManifests reads a YAML stream (documents split on ---) or a JSON
// list into the API's manifests, every field kept.
func readManifests(cmd *cobra.Command, file string) ([]map[string]any, error) {
	var raw []byte
	var err error
	if file == "-" {
		raw, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 16<<20))
	} else {
		raw, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, err
	}
	var list []map[string]any
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &list); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		return list, nil
	}
	for i, doc := range splitYAML(string(raw)) {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i+1, err)
		}
		if len(m) > 0 {
			list = append(list, m)
		}
	}
	if len(list) == 0 {
		return nil, usagef("%s holds no manifest", file)
	}
	return list, nil
}

func splitYAML(s string) []string {
	var docs []string
	var cur strings.Builder
	for line := range strings.Lines(s) {
		if strings.TrimRight(line, " \t\r\n") == "---" {
			docs = append(docs, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
	}
	return append(docs, cur.String())
}

// ---- provisioning jobs ----

var jobHead = []string{"ID", "NAME", "PROVIDER", "STATE", "SPACE", "AGE"}

func jobRow(j client.ProvisioningJob) []string {
	space := ""
	if j.SpaceId != nil {
		space = j.SpaceId.String()
	}
	name := ""
	if j.Name != nil {
		name = *j.Name
	}
	return []string{j.Id.String(), name, string(j.Provider), string(j.State), space, age(j.CreatedAt)}
}

func jobDone(s client.ProvisioningJobState) bool {
	return s == client.ProvisioningJobStateSucceeded || s == client.ProvisioningJobStateFailed || s == client.ProvisioningJobStateCanceled
}

func jobsCmd(a *app) *cobra.Command {
	var file, key string
	create := &cobra.Command{
		Use:   "create -f JOB",
		Short: "Start a provisioning job: create a cluster and register it",
		Long: `Start a provisioning job from a file holding the API's
CreateProvisioningJobRequest (JSON or YAML): the cluster is created in the
connected account, then registered as a space. Follow it with
'spaces jobs watch'.`,
		Example: `  spaces jobs create -f cluster.yaml
  spaces jobs create -f cluster.yaml -o json | jq -r .id | xargs spaces jobs watch`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "filename"); err != nil {
				return err
			}
			body := map[string]any{}
			if err := readObject(cmd, file, &body); err != nil {
				return err
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			var p client.CreateProvisioningJobParams
			if key != "" {
				p.IdempotencyKey = &key
			}
			raw, _ := json.Marshal(body)
			r, err := client.Result(api.CreateProvisioningJobWithBodyWithResponse(cmd.Context(), &p, "application/json", bytes.NewReader(raw)))
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), r.JSON201, jobHead, func(add func(...string)) { add(jobRow(*r.JSON201)...) })
		},
	}
	create.Flags().StringVarP(&file, "filename", "f", "", "the job as a JSON or YAML file ('-' reads standard input)")
	create.Flags().StringVar(&key, "idempotency-key", "", "the Idempotency-Key (default a new one per run)")
	var timeout, interval time.Duration
	watch := &cobra.Command{
		Use:   "watch JOB_ID",
		Short: "Follow a provisioning job until it ends",
		Long: `Print each step of a provisioning job as it happens, until it succeeds
(exit 0), fails or is canceled (exit 1), or --timeout passes (exit 5).`,
		Example: `  spaces jobs watch 4a7e… --timeout 30m`,
		Args:    exactArgs(1, "one job id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			seen := 0
			for {
				r, err := client.Result(api.GetProvisioningJobWithResponse(ctx, args[0], nil))
				if err != nil && ctx.Err() == nil {
					return err
				}
				if err == nil {
					j := r.JSON200
					for _, s := range j.Steps[min(seen, len(j.Steps)):] {
						fmt.Fprintf(cmd.OutOrStdout(), "%s  %-13s %s\n", s.At.Format(time.RFC3339), s.State, strings.TrimSpace(str(s.CloudStatus)+" "+str(s.Message)))
					}
					seen = len(j.Steps)
					if jobDone(j.State) {
						if j.State != client.ProvisioningJobStateSucceeded {
							msg := ""
							if j.Failure != nil {
								msg = ": " + j.Failure.Message
							}
							return fmt.Errorf("job %s %s%s", j.Id, j.State, msg)
						}
						return a.print(cmd.OutOrStdout(), j, jobHead, func(add func(...string)) { add(jobRow(*j)...) })
					}
				}
				t := time.NewTimer(interval)
				select {
				case <-ctx.Done():
					t.Stop()
					if cmd.Context().Err() != nil {
						return cmd.Context().Err()
					}
					return timeoutError{fmt.Errorf("timed out after %s waiting for job %s", timeout, args[0])}
				case <-t.C:
				}
			}
		},
	}
	watch.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "how long to follow")
	watch.Flags().DurationVar(&interval, "interval", 5*time.Second, "how often to read the job")
	get := &cobra.Command{
		Use:     "get JOB_ID",
		Short:   "Show one provisioning job",
		Example: `  spaces jobs get 4a7e… -o yaml`,
		Args:    exactArgs(1, "one job id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			r, err := client.Result(api.GetProvisioningJobWithResponse(cmd.Context(), args[0], nil))
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), r.JSON200, jobHead, func(add func(...string)) { add(jobRow(*r.JSON200)...) })
		},
	}
	return group("jobs", "Provisioning jobs: create, watch, get", `  spaces jobs create -f cluster.yaml
  spaces jobs watch 4a7e…`, create, watch, get)
}
