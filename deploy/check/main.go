// Command check validates deploy/ offline: every *.nomad.hcl is decoded by Nomad's
// own job-spec parser (github.com/hashicorp/nomad/jobspec2, strict: unknown blocks or
// attributes are errors, HCL variables and functions evaluated), then checked against
// what a Tranche deployment needs; other *.hcl files (ACL policies) are parsed as HCL;
// a compose file is loaded by Docker Compose's own loader (compose-go: schema,
// interpolation, merge keys, references between services, secrets and volumes).
//
//	go run . ../nomad/*.hcl ../compose.yaml
//	go run . -v ../nomad/control.nomad.hcl   # also print the decoded args and templates
//
// It does not contact a Nomad server: server-side validation (e.g. resources against
// the nodes) happens at `nomad job plan`.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/jobspec2"
)

func main() {
	failed := false
	paths := os.Args[1:]
	verbose := len(paths) > 0 && paths[0] == "-v"
	if verbose {
		paths = paths[1:]
	}
	for _, path := range paths {
		summary, problems := check(path, verbose)
		if len(problems) == 0 {
			fmt.Printf("ok    %s: %s\n", path, summary)
			continue
		}
		failed = true
		for _, p := range problems {
			fmt.Printf("FAIL  %s: %s\n", path, p)
		}
	}
	if failed {
		os.Exit(1)
	}
}

func check(path string, verbose bool) (string, []string) {
	src, err := os.ReadFile(path)
	if err != nil {
		return "", []string{err.Error()}
	}
	if strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml") {
		return checkCompose(path)
	}
	if !strings.HasSuffix(path, ".nomad.hcl") {
		f, diags := hclparse.NewParser().ParseHCL(src, path)
		if diags.HasErrors() {
			return "", []string{diags.Error()}
		}
		if _, diags := f.Body.JustAttributes(); !diags.HasErrors() {
			return "", []string{"expected blocks (an ACL policy), found only attributes"}
		}
		return "HCL syntax", nil
	}
	job, err := jobspec2.ParseWithConfig(&jobspec2.ParseConfig{
		Path:    path,
		BaseDir: filepath.Dir(path),
		Body:    src,
		Strict:  true,
	})
	if err != nil {
		return "", []string{err.Error()}
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	name := *job.ID
	typ := *job.Type
	role := ""
	for _, c := range job.Constraints {
		if c.LTarget == "${meta.tranche_role}" {
			role = c.RTarget
		}
	}
	if role == "" {
		bad("no constraint on ${meta.tranche_role}")
	}
	var tasks []*api.Task
	for _, g := range job.TaskGroups {
		tasks = append(tasks, g.Tasks...)
		if g.RestartPolicy == nil {
			bad("group %s has no restart block", *g.Name)
		}
	}
	if len(tasks) != 1 {
		bad("expected one task, found %d", len(tasks))
		return "", problems
	}
	t := tasks[0]
	args := argsOf(t)
	joined := strings.Join(args, " ")
	templates := ""
	for _, tpl := range t.Templates {
		if tpl.EmbeddedTmpl != nil {
			templates += *tpl.EmbeddedTmpl + "\n"
		}
	}
	for _, s := range []string{"password", "secret", "aws_access"} {
		if strings.Contains(strings.ToLower(joined), s+"=") {
			bad("a secret in the arguments: %q", joined)
		}
	}
	for k, v := range t.Env {
		if strings.Contains(k, "PASSWORD") && !strings.HasSuffix(k, "_FILE") {
			bad("env %s carries a secret inline", k)
		}
		if strings.HasPrefix(k, "AWS_SECRET") || strings.HasPrefix(k, "AWS_ACCESS_KEY") {
			bad("env %s=%s in the job file", k, v)
		}
	}
	if verbose {
		fmt.Printf("--- %s args:\n%s\n--- templates:\n%s", path, strings.Join(args, "\n"), templates)
	}
	killTimeout := time.Duration(0)
	if t.KillTimeout != nil {
		killTimeout = *t.KillTimeout
	}

	switch {
	case strings.HasPrefix(name, "tranche-") && typ == "system":
		want := map[string]string{"render": "process,render", "sign": "sign", "mail": "mail"}[role]
		if want == "" {
			bad("unknown role %q", role)
		}
		if len(args) == 0 || args[0] != "worker" {
			bad("command is not `tranche worker`: %q", joined)
		}
		for _, flag := range []string{"--broker", "--store", "--queues", "--concurrency"} {
			if !slices.Contains(args, flag) {
				bad("worker without %s", flag)
			}
		}
		if i := slices.Index(args, "--queues"); i >= 0 && i+1 < len(args) && args[i+1] != want {
			bad("role %s serves queues %q, expected %q", role, args[i+1], want)
		}
		if i := slices.Index(args, "--store"); i >= 0 && i+1 < len(args) && !strings.HasPrefix(args[i+1], "s3://") {
			bad("--store is not s3://…")
		}
		if t.KillSignal != "SIGTERM" {
			bad("kill_signal %q, expected SIGTERM", t.KillSignal)
		}
		if killTimeout < 30*time.Second {
			bad("kill_timeout %s is shorter than the worker's 30 s grace period", killTimeout)
		}
		if t.Env["TRANCHE_REDIS_PASSWORD_FILE"] == "" {
			bad("no TRANCHE_REDIS_PASSWORD_FILE")
		}
		if t.Resources == nil || t.Resources.CPU == nil || t.Resources.MemoryMB == nil {
			bad("no cpu/memory resources")
		}
	case typ == "service" && role == "redis":
		for _, s := range []string{"maxmemory-policy noeviction", "appendonly yes"} {
			if !strings.Contains(templates+joined, s) {
				bad("redis without %q", s)
			}
		}
	case typ == "batch":
		for _, s := range []string{"tranche notes run", "--no-work", "tranche --broker", " wait ", "--on-done"} {
			if !strings.Contains(joined, s) {
				bad("control script without %q", s)
			}
		}
		if job.ParameterizedJob == nil || !slices.Contains(job.ParameterizedJob.MetaRequired, "date") {
			bad("control job is not parameterized by date")
		}
	default:
		bad("unexpected job %s of type %s", name, typ)
	}
	summary := fmt.Sprintf("job %s (%s, role %s), task %s: %s %s; kill %s after %s",
		name, typ, role, t.Name, t.Config["command"], short(joined), t.KillSignal, killTimeout)
	return summary, problems
}

func argsOf(t *api.Task) []string {
	raw, _ := t.Config["args"].([]any)
	var out []string
	for _, a := range raw {
		out = append(out, fmt.Sprint(a))
	}
	return out
}

func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 110 {
		return s[:107] + "..."
	}
	return s
}

// checkCompose loads a compose file as `docker compose config` would (no engine needed)
// and checks the Tranche services: graceful stop, secrets by file, Redis settings.
func checkCompose(path string) (string, []string) {
	opts, err := cli.NewProjectOptions([]string{path},
		cli.WithWorkingDirectory(filepath.Dir(path)),
		cli.WithConsistency(true),
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		return "", []string{err.Error()}
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		return "", []string{err.Error()}
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var names []string
	for name, svc := range project.Services {
		names = append(names, name)
		for k, v := range svc.Environment {
			secretName := strings.Contains(k, "PASSWORD") || strings.HasPrefix(k, "AWS_SECRET") || strings.HasPrefix(k, "AWS_ACCESS_KEY")
			if secretName && !strings.HasSuffix(k, "_FILE") && v != nil {
				bad("service %s: %s given inline", name, k)
			}
			if strings.HasSuffix(k, "_FILE") && v != nil && strings.HasPrefix(*v, "/run/secrets/") {
				secret := strings.TrimPrefix(*v, "/run/secrets/")
				if !slices.ContainsFunc(svc.Secrets, func(s types.ServiceSecretConfig) bool { return s.Source == secret }) {
					bad("service %s: %s names secret %q, which the service does not mount", name, k, secret)
				}
			}
		}
		cmd := strings.Join(svc.Command, " ")
		if len(svc.Command) > 1 && svc.Command[0] == "tranche" && svc.Command[1] == "worker" {
			if svc.StopSignal != "SIGTERM" {
				bad("service %s: stop_signal %q, expected SIGTERM", name, svc.StopSignal)
			}
			if svc.StopGracePeriod == nil || time.Duration(*svc.StopGracePeriod) < 30*time.Second {
				bad("service %s: stop_grace_period under the worker's 30 s grace period", name)
			}
			if !slices.Contains(svc.Command, "--queues") || !slices.Contains(svc.Command, "--store") {
				bad("service %s: worker without --queues or --store", name)
			}
		}
		if strings.HasPrefix(svc.Image, "redis:") {
			for _, s := range []string{"--maxmemory-policy noeviction", "--appendonly yes"} {
				if !strings.Contains(cmd, s) {
					bad("service %s: redis without %s", name, s)
				}
			}
		}
	}
	slices.Sort(names)
	return fmt.Sprintf("compose project %s, services %s", project.Name, strings.Join(names, ", ")), problems
}
