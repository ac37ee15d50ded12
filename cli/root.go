package cli

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "spaces",
		Short: "spaces controls the Spaces registry of Kubernetes clusters",
		Long: `spaces controls the Spaces registry of Kubernetes clusters: cloud accounts,
the clusters they can see, the spaces registered from them, environments,
deployment revisions and provisioning jobs.

Sign in once with 'spaces login'; every command then calls the API of that
server (or of --server, or of $SPACES_SERVER) with the stored token (or
$SPACES_TOKEN).

Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 conflict (already
registered, changed since read), 5 timed out (wait, watch), 6 not signed in
or refused.`,
		Example: `  # Sign in to the local stack (make run) as org acme
  spaces login --org acme

  # Connect an AWS account, then verify it once its trust is applied
  spaces accounts connect --provider aws --name prod --connection roleArn=arn:aws:iam::123456789012:role/spaces
  spaces accounts verify 0b8f6f7c-2f3a-4d1e-8c9b-7a6e5d4c3b2a

  # Register a cluster and wait until it is active
  spaces register --account 0b8f6f7c-2f3a-4d1e-8c9b-7a6e5d4c3b2a --config region=eu-west-1 --config clusterName=prod -o json
  spaces wait 6f1c7a52-3f8e-4c1e-9a57-2b1f0c9d8e11 --for status=active --timeout 5m`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(outputs, a.output) {
				return usagef("--output must be one of %s, got %q", strings.Join(outputs, ", "), a.output)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	root.PersistentFlags().StringVar(&a.server, "server", "", "the API's base URL (default $SPACES_SERVER, else the last login's server, else "+DefaultServer+")")
	root.PersistentFlags().StringVarP(&a.output, "output", "o", "table", "output format: table, json or yaml")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputs, cobra.ShellCompDirectiveNoFileComp))
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usageError{err} })

	root.AddGroup(&cobra.Group{ID: "basic", Title: "Spaces:"}, &cobra.Group{ID: "other", Title: "Accounts, environments and jobs:"})
	for _, c := range []*cobra.Command{
		registerCmd(a), listCmd(a), getCmd(a), labelCmd(a), waitCmd(a), deregisterCmd(a),
	} {
		c.GroupID = "basic"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{
		loginCmd(a), logoutCmd(a), accountsCmd(a), clustersCmd(a), environmentsCmd(a), revisionsCmd(a), jobsCmd(a), agentCmd(a),
	} {
		c.GroupID = "other"
		root.AddCommand(c)
	}
	// kubectl's nouns as well: 'spaces spaces list' reads as 'spaces list'.
	spacesAlias := &cobra.Command{Use: "spaces", Short: "Spaces (the same commands as at the top: register, list, get, label, wait, deregister)", GroupID: "other", Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() }}
	for _, c := range []*cobra.Command{registerCmd(a), listCmd(a), getCmd(a), labelCmd(a), waitCmd(a), deregisterCmd(a)} {
		spacesAlias.AddCommand(c)
	}
	root.AddCommand(spacesAlias)
	markUsage(root)
	return root
}

// markUsage refuses arguments to every command below the root that
// declares none (the root keeps cobra's own, which says "unknown command"
// and suggests one).
func markUsage(c *cobra.Command) {
	for _, sub := range c.Commands() {
		markUsage(sub)
	}
	if c.Args == nil && c.HasParent() {
		c.Args = noArgs
	}
}

// keyValues reads repeated k=v flags into a map.
func keyValues(flag string, vals []string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range vals {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--%s takes key=value, got %q", flag, kv)
		}
		m[k] = v
	}
	return m, nil
}

// requireFlags is a usage error naming each missing required flag.
func requireFlags(cmd *cobra.Command, names ...string) error {
	var missing []string
	for _, n := range names {
		if f := cmd.Flags().Lookup(n); f != nil && !f.Changed {
			missing = append(missing, "--"+n)
		}
	}
	if len(missing) > 0 {
		return usagef("%s needs %s", cmd.CommandPath(), strings.Join(missing, ", "))
	}
	return nil
}
