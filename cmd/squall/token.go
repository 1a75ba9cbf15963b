package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/squallhq/squall/master/auth"
)

func newTokenCommand() *cobra.Command {
	var (
		user, tenant, hmacFile, edFile string
		auths                          []string
		ttl                            time.Duration
		unsigned                       bool
	)
	cmd := &cobra.Command{
		Use:   "token --user USER --auth NAME=PATH:ROLES [--auth ...] (--hmac-key-file F | --ed25519-key-file F | --unsigned)",
		Short: "Mint an API token and print it",
		Example: `  squall token --user ops --auth all=root:admin --hmac-key-file /etc/squall/token.key --ttl 8h
  squall token --user engine --auth all=root:view,fleet_report --hmac-key-file /etc/squall/token.key --ttl 8760h > engine.token
  squall token --user dev --auth all=root:admin --unsigned`,
		Long: `Token mints a bearer token for Squall's APIs and prints it on standard output.

Each --auth names an authorization: NAME=PATH:ROLES, with PATH the node names
from root down to the part of the tree the holder may touch and ROLES among
view, edit, test_event_execute_actions, fleet_report (fleet heartbeats only),
findings_read, findings_write (the findings API only), deadletters_read,
deadletters_replay (the dead-letter API only, on the root) and admin; for example
  --auth all=root:admin --auth acme=root,acme:view,edit
  --auth all=root:view,fleet_report   (an engine)
  --auth fleet=root:fleet_report      (a satellite's heartbeats)
  --auth findings=root,acme:findings_write   (a findings writer for tenant acme:
                                             the finding action, a scanner)
  --auth findings=root,acme:findings_read    (a findings reader for tenant acme)
  --auth dl=root:deadletters_replay   (squall deadletters: list, show, replay)
The findings API needs findings_read to read and findings_write to insert
(a patch needs both), on an authorization whose path is [root] or
[root, TENANT, ...]; view implies findings_read, edit implies both.
--tenant sets the tenant the findings API lets the holder use, when the
authorizations' paths do not name a single one (e.g. all=root:view).

Tokens are JWTs signed with an HS256 key file (at least 32 bytes) or an
Ed25519 private key (PEM PKCS#8, e.g. openssl genpkey -algorithm ed25519), and
expire after --ttl. --unsigned prints the spec's unsigned base64 token instead,
for masters started with --allow-unsigned-tokens (squall dev).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := auth.Claims{User: user, Tenant: tenant, Auths: map[string]auth.Authorization{}}
			if user == "" {
				return errors.New("--user is empty")
			}
			if len(auths) == 0 {
				return errors.New("the token would grant nothing: give --auth NAME=PATH:ROLES (e.g. acme=root,acme:view for the configuration API, findings=root,acme:findings_write for a findings writer)")
			}
			for _, s := range auths {
				name, a, err := auth.ParseAuth(s)
				if err != nil {
					return err
				}
				if _, dup := c.Auths[name]; dup {
					return fmt.Errorf("authorization %s is given twice", name)
				}
				c.Auths[name] = a
			}
			var token string
			switch keys := countSet(hmacFile != "", edFile != "", unsigned); {
			case keys != 1:
				return errors.New("give exactly one of --hmac-key-file, --ed25519-key-file and --unsigned")
			case unsigned:
				token = auth.EncodeUnsigned(c)
			default:
				var s auth.Signer
				var err error
				if hmacFile != "" {
					s.HMACKey, err = auth.LoadHMACKey(hmacFile)
				} else {
					s.PrivateKey, err = auth.LoadEd25519Private(edFile)
				}
				if err != nil {
					return err
				}
				if token, err = s.Sign(c, ttl); err != nil {
					return err
				}
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), token)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&user, "user", "", "user name carried by the token (required)")
	f.StringArrayVar(&auths, "auth", nil, "authorization NAME=PATH:ROLES (repeatable)")
	f.StringVar(&tenant, "tenant", "", "tenant for the findings API")
	f.DurationVar(&ttl, "ttl", 24*time.Hour, "lifetime of a signed token")
	f.StringVar(&hmacFile, "hmac-key-file", "", "HS256 key file")
	f.StringVar(&edFile, "ed25519-key-file", "", "Ed25519 private key file (PEM)")
	f.BoolVar(&unsigned, "unsigned", false, "print an unsigned token (dev mode only)")
	_ = cmd.MarkFlagRequired("user")
	return cmd
}

func countSet(b ...bool) int {
	n := 0
	for _, x := range b {
		if x {
			n++
		}
	}
	return n
}
