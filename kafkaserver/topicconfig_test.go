package kafkaserver

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
)

var update = flag.Bool("update", false, "rewrite the topic config list in examples/kafka-broker/README.md from topicconfig.go")

// TestTopicConfigTable: the table is in name order (configDefOf searches
// it), every default passes its own validation unchanged, and every
// config the facade implements reads back the value it was set to, its
// default from the facade's zero TopicConfig.
func TestTopicConfigTable(t *testing.T) {
	require.True(t, slices.IsSortedFunc(kafkaTopicConfigs, func(a, b configDef) int { return strings.Compare(a.name, b.name) }))
	for i := range kafkaTopicConfigs {
		d := &kafkaTopicConfigs[i]
		require.NotEmpty(t, d.doc, d.name)
		v, err := d.check(d.def)
		require.NoError(t, err, d.name)
		require.Equal(t, d.def, v, d.name)
		require.Equal(t, d.get == nil, d.set == nil, d.name)
		if d.get == nil {
			continue
		}
		require.Equal(t, d.def, d.libValue(diskless.TopicConfig{}), "%s: the facade's default", d.name)
		var cfg diskless.TopicConfig
		require.NoError(t, d.set(&cfg, d.def), d.name)
		require.Equal(t, d.def, d.libValue(cfg), d.name)
	}
}

// TestDescribeConfigsDocumentation: DescribeConfigs answers each topic
// config's documentation from the table when asked, and none otherwise.
func TestDescribeConfigsDocumentation(t *testing.T) {
	p := startBroker(t, nil)
	cl := p.client(t)
	ctx := t.Context()
	_, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, "docs")
	require.NoError(t, err)
	for _, include := range []bool{true, false} {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.IncludeDocumentation = include
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "docs"
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Len(t, resp.Resources, 1)
		require.Len(t, resp.Resources[0].Configs, len(kafkaTopicConfigs))
		for _, c := range resp.Resources[0].Configs {
			if !include {
				require.Nil(t, c.Documentation, c.Name)
				continue
			}
			d, ok := configDefOf(c.Name)
			require.True(t, ok, c.Name)
			require.NotNil(t, c.Documentation, c.Name)
			require.Equal(t, d.doc, *c.Documentation, c.Name)
		}
	}
}

// The markers around the generated list in the README.
const (
	readmePath  = "../examples/kafka-broker/README.md"
	readmeBegin = "<!-- topic configs: generated from kafkaserver/topicconfig.go by TestTopicConfigsREADME (go test ./kafkaserver -run TestTopicConfigsREADME -update) -->\n"
	readmeEnd   = "<!-- end of topic configs -->\n"
)

// topicConfigsMarkdown renders the table as the README lists it.
func topicConfigsMarkdown() string {
	var b strings.Builder
	b.WriteString("| config | type | default | here | what it does |\n|---|---|---|---|---|\n")
	for i := range kafkaTopicConfigs {
		d := &kafkaTopicConfigs[i]
		def := "`" + d.def + "`"
		if d.def == "" {
			def = "(empty)"
		}
		here := "stored and described"
		switch {
		case d.fixed != "":
			here = "applied, fixed at creation"
		case d.set != nil:
			here = "applied, alterable"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", d.name, strings.ToLower(d.typ.String()), def, here, d.doc)
	}
	return b.String()
}

// TestTopicConfigsREADME: the list of topic configs in
// examples/kafka-broker/README.md is the table's; with -update, the test
// writes it there.
func TestTopicConfigsREADME(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	require.NoError(t, err)
	before, rest, ok := bytes.Cut(readme, []byte(readmeBegin))
	require.True(t, ok, "%s has no line %q", readmePath, readmeBegin)
	list, after, ok := bytes.Cut(rest, []byte(readmeEnd))
	require.True(t, ok, "%s has no line %q", readmePath, readmeEnd)
	want := topicConfigsMarkdown()
	if *update {
		out := slices.Concat(before, []byte(readmeBegin), []byte(want), []byte(readmeEnd), after)
		require.NoError(t, os.WriteFile(readmePath, out, 0o644))
		return
	}
	require.Equal(t, want, string(list), "the README's topic configs differ from topicconfig.go: run go test ./kafkaserver -run TestTopicConfigsREADME -update")
}
