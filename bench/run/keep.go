package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// keptSections returns the sections of the report at path by part, so that
// a run of some parts (-only) keeps the others' latest figures. A section
// this tool wrote sits between <!-- part:NAME --> markers and ends with the
// line naming its own run. A report from before the markers is split at its
// "## " headings, and each kept section gets that report's run and command
// lines, so no figure loses the run that produced it.
func keptSections(path string) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	s := string(b)
	marked := regexp.MustCompile(`(?s)<!-- part:(\w+) -->\n.*?<!-- /part:(\w+) -->\n\n`)
	for _, m := range marked.FindAllStringSubmatch(s, -1) {
		if m[1] == m[2] {
			out[m[1]] = m[0]
		}
	}
	if len(out) > 0 {
		return out
	}
	// The unmarked report: one run for every section.
	var run, cmd string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "- Run: ") {
			run = strings.TrimSuffix(strings.TrimPrefix(l, "- Run: "), ".")
		}
		if strings.HasPrefix(l, "- Command: ") {
			cmd = strings.TrimPrefix(l, "- Command: ")
		}
	}
	headings := map[string]string{
		"## Service proxy:":               "proxy",
		"## Userspace proxy":              "userspace",
		"## Cluster DNS":                  "dns",
		"## Network programming latency":  "netprog",
		"## API server: svcnet apiserver": "api",
	}
	parts := strings.Split(s, "\n## ")
	for i, p := range parts {
		if i == 0 {
			continue
		}
		p = "## " + p
		for prefix, part := range headings {
			if strings.HasPrefix(p, prefix) {
				body := strings.TrimRight(p, "\n") + "\n\n"
				out[part] = fmt.Sprintf("<!-- part:%s -->\n%s_These figures: run of %s, %s._\n\n<!-- /part:%s -->\n\n", part, body, run, cmd, part)
			}
		}
	}
	return out
}
