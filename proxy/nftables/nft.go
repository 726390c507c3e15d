package nftables

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/svcnet/svcnet/proxy"
)

// NFT is the part of knftables.Interface the mode uses; knftables.Fake
// implements it for tests, and ExecNFT runs the nft binary through the proxy
// core's Executor (so that the rules land in the node's network namespace
// even when the proxy runs outside it).
type NFT interface {
	NewTransaction() *knftables.Transaction
	Run(ctx context.Context, tx *knftables.Transaction) error
	List(ctx context.Context, objectType string) ([]string, error)
}

var (
	_ NFT = (*knftables.Fake)(nil)
	_ NFT = (*ExecNFT)(nil)
)

// ExecNFT runs `nft` for one family and table.
type ExecNFT struct {
	Family knftables.Family
	Table  string
	Exec   proxy.Executor
	// ctx only supplies NewTransaction's family and table.
	ctx *knftables.Fake
}

// NewExecNFT returns an ExecNFT; a nil exec runs nft on this host.
func NewExecNFT(family knftables.Family, table string, exec proxy.Executor) *ExecNFT {
	if exec == nil {
		exec = proxy.OSExecutor{}
	}
	return &ExecNFT{Family: family, Table: table, Exec: exec, ctx: knftables.NewFake(family, table)}
}

// NewTransaction implements NFT.
func (n *ExecNFT) NewTransaction() *knftables.Transaction { return n.ctx.NewTransaction() }

// Run implements NFT: the whole transaction is one `nft -f -`, which the
// kernel applies atomically.
func (n *ExecNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	script := tx.String()
	if strings.Contains(script, "# ERROR:") {
		return fmt.Errorf("invalid transaction: %s", script[strings.Index(script, "# ERROR:"):])
	}
	if _, err := n.Exec.Run(ctx, []byte(script), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("nft: %w", err)
	}
	return nil
}

// List implements NFT for "chains", "sets" and "maps" of our table. A
// missing table gives an empty list and no error.
func (n *ExecNFT) List(ctx context.Context, objectType string) ([]string, error) {
	all, err := n.listTables(ctx, objectType)
	var names []string
	for _, o := range all {
		if o.table == n.Table {
			names = append(names, o.name)
		}
	}
	return names, err
}

// listTables lists the "chains", "sets" or "maps" of our table and of the
// dispatch tables of --nftables-shards.
func (n *ExecNFT) listTables(ctx context.Context, objectType string) ([]tobj, error) {
	kind := strings.TrimSuffix(objectType, "s")
	// "list chains <family>" prints declarations only (no rules), and with
	// --terse no set elements: cheap even with 100k chains, unlike "list
	// table".
	out, err := n.Exec.Run(ctx, nil, "nft", "--json", "--terse", "list", kind+"s", string(n.Family))
	if err != nil {
		if strings.Contains(err.Error(), "No such file or directory") {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", objectType, err)
	}
	var doc struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("parse nft --json output: %w", err)
	}
	var objs []tobj
	for _, obj := range doc.Nftables {
		raw, ok := obj[kind]
		if !ok {
			continue
		}
		var o struct {
			Name  string `json:"name"`
			Table string `json:"table"`
		}
		if err := json.Unmarshal(raw, &o); err == nil && (o.Table == n.Table || (n.Table == TableName && isShardTable(o.Table))) {
			objs = append(objs, tobj{tableRef(o.Table), o.Name})
		}
	}
	return objs, nil
}

// tableRef is how the plan names table: "" for TableName.
func tableRef(table string) string {
	if table == TableName {
		return ""
	}
	return table
}
