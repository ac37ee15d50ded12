package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"spaces/client"
)

// whoCanList checks a token with the cheapest call that needs one.
func (a *app) whoCanList(ctx context.Context, c config) (int, error) {
	api, err := client.New(c.Server, client.Options{Token: c.Token, HTTPClient: a.env.HTTPClient, UserAgent: "spaces-cli"})
	if err != nil {
		return 0, err
	}
	limit := 1
	r, err := client.Result(api.ListSpacesWithResponse(ctx, &client.ListSpacesParams{Limit: &limit}))
	if err != nil {
		return 0, err
	}
	return len(r.JSON200.Items), nil
}

func spaceRow(s client.Space) []string {
	labels := ""
	if s.Labels != nil {
		labels = labelsText(*s.Labels)
	}
	conn := ""
	if s.Connectivity != nil {
		conn = string(*s.Connectivity)
	}
	return []string{s.Id.String(), s.Name, string(s.Provider), conn, string(s.Status), labels, age(s.CreatedAt)}
}

var spaceHead = []string{"ID", "NAME", "PROVIDER", "CONNECTIVITY", "STATUS", "LABELS", "AGE"}

// spacesOut is spaces as printed: an agent space's bootstrap, which
// registration answers, is dropped, since it is a credential. Setting the
// field to nil would not do: a generated type with a union (Space's allOf
// of a oneOf) keeps the JSON it was read from and marshals that back with
// its fields over it, so the key is deleted from the object itself.
func spacesOut(spaces ...client.Space) ([]map[string]any, error) {
	out := make([]map[string]any, len(spaces))
	for i, s := range spaces {
		raw, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, err
		}
		delete(out[i], "agent_bootstrap")
	}
	return out, nil
}

// printSpace prints one space.
func (a *app) printSpace(w io.Writer, s client.Space) error {
	out, err := spacesOut(s)
	if err != nil {
		return err
	}
	return a.print(w, out[0], spaceHead, func(add func(...string)) { add(spaceRow(s)...) })
}

func registerCmd(a *app) *cobra.Command {
	var provider, account, name, connectivity, file, key string
	var cfg, labels []string
	var synthetic bool
	cmd := &cobra.Command{
		Use:   "register",
		Short: "Register a cluster as a space",
		Long: `Register a cluster of a connected cloud account as a space. The cloud is
asked first whether the cluster exists (unless --synthetic). The new space
is unknown until its first probe; 'spaces wait' waits for it.

A retried registration is safe: each run sends an Idempotency-Key (pass
--idempotency-key to reuse one across runs; the same key with the same body
answers the first registration again).

An agent space's bootstrap token is never printed: install the agent with
'spaces agent install'.`,
		Example: `  # An EKS cluster (config keys: region, clusterName)
  spaces register --account 0b8f6f7c-2f3a-4d1e-8c9b-7a6e5d4c3b2a --config region=eu-west-1 --config clusterName=prod --label env=prod

  # A GKE cluster (projectId, location, clusterName), printing the space as JSON
  spaces register --provider gcp --account 3c… --config projectId=acme-prod --config location=europe-west1 --config clusterName=prod -o json

  # The whole request from a file (JSON or YAML, the API's RegisterSpaceRequest)
  spaces register -f space.yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			if file != "" {
				if err := readObject(cmd, file, &body); err != nil {
					return err
				}
			} else if err := requireFlags(cmd, "account", "config"); err != nil {
				return err
			}
			if provider != "" || body["provider"] == nil {
				body["provider"] = provider
			}
			if body["space_type"] == nil {
				body["space_type"] = "kubernetes"
			}
			if account != "" {
				body["cloud_account_id"] = account
			}
			if len(cfg) > 0 {
				m, err := keyValues("config", cfg)
				if err != nil {
					return err
				}
				body["config"] = m
			}
			if name != "" {
				body["name"] = name
			}
			if len(labels) > 0 {
				m, err := keyValues("label", labels)
				if err != nil {
					return err
				}
				body["labels"] = m
			}
			if connectivity != "" {
				body["connectivity"] = connectivity
			}
			if synthetic {
				body["synthetic"] = true
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			raw, _ := json.Marshal(body)
			var params client.RegisterSpaceParams
			if key != "" {
				params.IdempotencyKey = &key
			}
			r, err := client.Result(api.RegisterSpaceWithBodyWithResponse(cmd.Context(), &params, "application/json", strings.NewReader(string(raw))))
			if err != nil {
				return err
			}
			s := r.JSON201
			if s == nil {
				return fmt.Errorf("registration answered %d without a space", r.StatusCode())
			}
			return a.printSpace(cmd.OutOrStdout(), *s)
		},
	}
	f := cmd.Flags()
	f.StringVar(&provider, "provider", "aws", "the cloud: aws, gcp or azure")
	f.StringVar(&account, "account", "", "the cloud account's id (spaces accounts list)")
	f.StringArrayVar(&cfg, "config", nil, "the cluster's identity, key=value, repeated (aws: region, clusterName; gcp: projectId, location, clusterName; azure: subscriptionId, resourceGroup, clusterName)")
	f.StringVar(&name, "name", "", "display name (default the cluster's name)")
	f.StringArrayVarP(&labels, "label", "l", nil, "a label, key=value, repeated")
	f.StringVar(&connectivity, "connectivity", "", "direct (Spaces calls the API server) or agent (an agent in the cluster connects out)")
	f.BoolVar(&synthetic, "synthetic", false, "register a placeholder that is not a real cluster")
	f.StringVarP(&file, "filename", "f", "", "the request as a JSON or YAML file ('-' reads standard input)")
	f.StringVar(&key, "idempotency-key", "", "the Idempotency-Key (default a new one per run)")
	_ = cmd.RegisterFlagCompletionFunc("provider", cobra.FixedCompletions([]string{"aws", "gcp", "azure"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("connectivity", cobra.FixedCompletions([]string{"direct", "agent"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// readObject reads a JSON or YAML object from a file or standard input.
func readObject(cmd *cobra.Command, file string, into any) error {
	var raw []byte
	var err error
	if file == "-" {
		raw, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 16<<20))
	} else {
		raw, err = os.ReadFile(file)
	}
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

func listCmd(a *app) *cobra.Command {
	var selector, status, provider, account, prefix string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List spaces",
		Long: `List the org's spaces, every page of them, optionally filtered. -o json
and -o yaml print a list of the API's space objects.`,
		Example: `  spaces list
  spaces list -l env=prod,team!=web --status active
  spaces list --provider gcp -o json | jq -r '.[].id'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			p := client.ListSpacesParams{}
			if selector != "" {
				p.LabelSelector = &selector
			}
			if status != "" {
				s := client.StatusFilter(status)
				p.Status = &s
			}
			if provider != "" {
				v := client.ProviderFilter(provider)
				p.Provider = &v
			}
			if prefix != "" {
				p.NamePrefix = &prefix
			}
			if account != "" {
				id, err := uuid.Parse(account)
				if err != nil {
					return usagef("--account is a cloud account's id, got %q", account)
				}
				p.CloudAccountId = &id
			}
			items := []client.Space{}
			for {
				r, err := client.Result(api.ListSpacesWithResponse(cmd.Context(), &p))
				if err != nil {
					return err
				}
				items = append(items, r.JSON200.Items...)
				if r.JSON200.NextCursor == nil {
					break
				}
				p.Cursor = r.JSON200.NextCursor
			}
			out, err := spacesOut(items...)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), out, spaceHead, func(add func(...string)) {
				for _, s := range items {
					add(spaceRow(s)...)
				}
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&selector, "selector", "l", "", "label selector, as kubectl's (env=prod,tier in (web,api),!legacy)")
	f.StringVar(&status, "status", "", "only spaces of this status: active, inactive or unknown")
	f.StringVar(&provider, "provider", "", "only spaces of this cloud: aws, gcp or azure")
	f.StringVar(&account, "account", "", "only spaces of this cloud account")
	f.StringVar(&prefix, "name-prefix", "", "only spaces whose name starts so")
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions([]string{"active", "inactive", "unknown"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func getCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "get SPACE_ID",
		Short: "Show one space",
		Example: `  spaces get 6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11
  spaces get 6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11 -o yaml`,
		Args:              exactArgs(1, "one space id"),
		ValidArgsFunction: a.completeSpaces,
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			s, _, err := getSpace(cmd.Context(), api, args[0])
			if err != nil {
				return err
			}
			return a.printSpace(cmd.OutOrStdout(), *s)
		},
	}
}

func getSpace(ctx context.Context, api *client.API, id string) (*client.Space, string, error) {
	r, err := client.Result(api.GetSpaceWithResponse(ctx, id, nil))
	if err != nil {
		return nil, "", err
	}
	return r.JSON200, r.HTTPResponse.Header.Get("ETag"), nil
}

func labelCmd(a *app) *cobra.Command {
	var overwrite bool
	cmd := &cobra.Command{
		Use:   "label SPACE_ID KEY=VALUE... [KEY-]...",
		Short: "Add, change or remove a space's labels",
		Long: `Set a space's labels as kubectl label does: KEY=VALUE adds a label, KEY-
removes one, and changing a label that has another value needs
--overwrite. The write is conditional on the space as read (If-Match): a
space changed meanwhile is read again and the change applied again.`,
		Example: `  spaces label 6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11 env=prod team=platform
  spaces label 6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11 env=staging --overwrite
  spaces label 6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11 legacy-`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("%s takes a space id and at least one KEY=VALUE or KEY-", cmd.CommandPath())
			}
			return nil
		},
		ValidArgsFunction: a.completeSpaces,
		RunE: func(cmd *cobra.Command, args []string) error {
			set, remove := map[string]string{}, []string{}
			for _, arg := range args[1:] {
				if k, ok := strings.CutSuffix(arg, "-"); ok && !strings.Contains(arg, "=") {
					remove = append(remove, k)
					continue
				}
				k, v, ok := strings.Cut(arg, "=")
				if !ok || k == "" {
					return usagef("a label is KEY=VALUE or KEY-, got %q", arg)
				}
				set[k] = v
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			for attempt := 1; ; attempt++ {
				s, etag, err := getSpace(cmd.Context(), api, args[0])
				if err != nil {
					return err
				}
				labels := client.SpaceLabels{}
				if s.Labels != nil {
					labels = maps.Clone(*s.Labels)
				}
				for k, v := range set {
					if old, ok := labels[k]; ok && old != v && !overwrite {
						return fmt.Errorf("label %q already has the value %q: pass --overwrite to change it", k, old)
					}
					labels[k] = v
				}
				for _, k := range remove {
					delete(labels, k)
				}
				r, err := client.Result(api.SetSpaceLabelsWithResponse(cmd.Context(), args[0], &client.SetSpaceLabelsParams{IfMatch: &etag}, client.SetLabelsRequest{Labels: labels}))
				if errors.Is(err, client.ErrPreconditionFailed) && attempt < 5 {
					continue // changed since read: read again
				}
				if err != nil {
					return err
				}
				return a.printSpace(cmd.OutOrStdout(), *r.JSON200)
			}
		},
	}
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "change labels that already have another value")
	return cmd
}

func waitCmd(a *app) *cobra.Command {
	var forCond string
	var timeout, interval time.Duration
	cmd := &cobra.Command{
		Use:   "wait SPACE_ID --for status=STATUS|delete",
		Short: "Wait until a space has a status, or is deregistered",
		Long: `Read the space every --interval until it has the status --for names
(status=active, status=inactive, status=unknown) or, with --for delete, until
it is deregistered. Exit code 5 when --timeout passes first.`,
		Example: `  spaces wait 6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11 --for status=active --timeout 5m
  spaces wait 6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11 --for delete`,
		Args:              exactArgs(1, "one space id"),
		ValidArgsFunction: a.completeSpaces,
		RunE: func(cmd *cobra.Command, args []string) error {
			var want string
			switch {
			case forCond == "delete":
			case strings.HasPrefix(forCond, "status="):
				want = strings.TrimPrefix(forCond, "status=")
				if want != "active" && want != "inactive" && want != "unknown" {
					return usagef("--for status= takes active, inactive or unknown, got %q", want)
				}
			default:
				return usagef("--for takes status=<status> or delete, got %q", forCond)
			}
			if interval <= 0 || timeout <= 0 {
				return usagef("--interval and --timeout must be positive")
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			last := ""
			for {
				s, _, err := getSpace(ctx, api, args[0])
				switch {
				case want == "" && errors.Is(err, client.ErrNotFound):
					fmt.Fprintf(cmd.OutOrStdout(), "space %s deregistered\n", args[0])
					return nil
				case err != nil && ctx.Err() == nil:
					return err
				case err == nil:
					last = string(s.Status)
					if want != "" && last == want {
						fmt.Fprintf(cmd.OutOrStdout(), "space %s %s\n", args[0], last)
						return nil
					}
				}
				t := time.NewTimer(interval)
				select {
				case <-ctx.Done():
					t.Stop()
					if cmd.Context().Err() != nil {
						return cmd.Context().Err()
					}
					return timeoutError{fmt.Errorf("timed out after %s waiting for %s (status %s)", timeout, forCond, last)}
				case <-t.C:
				}
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&forCond, "for", "", "status=active, status=inactive, status=unknown, or delete")
	f.DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait")
	f.DurationVar(&interval, "interval", 2*time.Second, "how often to read the space")
	_ = cmd.MarkFlagRequired("for")
	_ = cmd.RegisterFlagCompletionFunc("for", cobra.FixedCompletions([]string{"status=active", "status=inactive", "status=unknown", "delete"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func deregisterCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "deregister SPACE_ID",
		Short: "Deregister a space",
		Long: `Deregister a space: its environments are gated, its policies detached,
its credentials grant removed. Its id answers 404 from then on (with what
remains of it); re-registering the cluster makes a new space.`,
		Example:           `  spaces deregister 6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11`,
		Args:              exactArgs(1, "one space id"),
		ValidArgsFunction: a.completeSpaces,
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			_, err = client.Result(api.DeregisterSpaceWithResponse(cmd.Context(), args[0], nil))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "space %s deregistered\n", args[0])
			return nil
		},
	}
}

// completeSpaces offers the org's space ids (shell completion), their
// names as the description.
func (a *app) completeSpaces(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	api, err := a.api()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	r, err := client.Result(api.ListSpacesWithResponse(cmd.Context(), nil))
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []string
	for _, s := range r.JSON200.Items {
		if strings.HasPrefix(s.Id.String(), toComplete) {
			out = append(out, s.Id.String()+"\t"+s.Name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
