package nftables

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/knftables"
)

// applier programs a planned transaction; it is the only I/O of a sync.
type applier interface {
	// apply runs ops as one atomic transaction.
	apply(ctx context.Context, ops []op) error
	// list returns the chains and sets (and maps) of the tables (none
	// when they do not exist).
	list(ctx context.Context) (chains, sets []tobj, err error)
}

// partsApplier applies a sequence of transactions, one after the other,
// possibly preparing the next while the kernel commits the current one.
type partsApplier interface {
	applyParts(ctx context.Context, parts [][]op) error
}

// textApplier writes the transaction as an nft script through an NFT: the
// knftables.Fake of the tests, kpdiff and the golden files, or ExecNFT
// (`nft -f -`).
type textApplier struct {
	nft    NFT
	family knftables.Family
}

// transaction replays ops into a knftables transaction. With dispatch
// tables (--nftables-shards) every object is qualified with its family
// and table, which knftables allows only in a transaction without a
// default table: ExecNFT's script is then written by such a context, and
// a knftables.Fake must have been made without a default
// (knftables.NewFake("", "")).
func transaction(nft NFT, family knftables.Family, ops []op) (*knftables.Transaction, error) {
	multi := slices.ContainsFunc(ops, func(o op) bool { return tableRef(objTable(o.obj)) != "" })
	if f, ok := nft.(*knftables.Fake); ok && f.Table == nil {
		multi = true // a Fake without a default table (or without its table yet)
	}
	tx := nft.NewTransaction()
	if multi {
		switch n := nft.(type) {
		case *ExecNFT:
			tx = knftables.NewFake("", "").NewTransaction()
		case *knftables.Fake:
			if n.Table != nil {
				return nil, fmt.Errorf("dispatch tables need a knftables.Fake without a default table")
			}
		}
	}
	for _, o := range ops {
		obj := o.obj
		if multi {
			obj = qualify(obj, family)
		}
		switch o.verb {
		case opAdd:
			tx.Add(obj)
		case opFlush:
			tx.Flush(obj)
		case opDelete:
			tx.Delete(obj)
		}
	}
	return tx, nil
}

// objCopy returns a copy of o and pointers to the copy's family and
// table (a Table's name is its table); nil pointers for other objects.
func objCopy(o knftables.Object) (knftables.Object, *knftables.Family, *string) {
	switch x := o.(type) {
	case *knftables.Table:
		c := *x
		return &c, &c.Family, &c.Name
	case *knftables.Chain:
		c := *x
		return &c, &c.Family, &c.Table
	case *knftables.Rule:
		c := *x
		return &c, &c.Family, &c.Table
	case *knftables.Set:
		c := *x
		return &c, &c.Family, &c.Table
	case *knftables.Map:
		c := *x
		return &c, &c.Family, &c.Table
	case *knftables.Element:
		c := *x
		return &c, &c.Family, &c.Table
	}
	return o, nil, nil
}

// objTable is the table an object names ("" for TableName).
func objTable(o knftables.Object) string {
	if _, _, t := objCopy(o); t != nil {
		return *t
	}
	return ""
}

// qualify returns a copy of o with its family and table filled in.
func qualify(o knftables.Object, family knftables.Family) knftables.Object {
	c, fam, table := objCopy(o)
	if fam != nil {
		*fam = family
		if *table == "" {
			*table = TableName
		}
	}
	return c
}

func (a *textApplier) apply(ctx context.Context, ops []op) error {
	tx, err := transaction(a.nft, a.family, ops)
	if err != nil {
		return err
	}
	return a.nft.Run(ctx, tx)
}

func (a *textApplier) list(ctx context.Context) (chains, sets []tobj, err error) {
	switch n := a.nft.(type) {
	case *knftables.Fake:
		n.RLock()
		defer n.RUnlock()
		for _, tables := range n.Tables { // a Fake per family
			for name, t := range tables {
				if name != TableName && !isShardTable(name) {
					continue
				}
				for c := range t.Chains {
					chains = append(chains, tobj{tableRef(name), c})
				}
				for s := range t.Sets {
					sets = append(sets, tobj{tableRef(name), s})
				}
				for m := range t.Maps {
					sets = append(sets, tobj{tableRef(name), m})
				}
			}
		}
		return chains, sets, nil
	case *ExecNFT:
		if chains, err = n.listTables(ctx, "chains"); err != nil {
			return nil, nil, err
		}
		if sets, err = n.listTables(ctx, "sets"); err != nil {
			return chains, nil, err
		}
		maps, err := n.listTables(ctx, "maps")
		return chains, append(sets, maps...), err
	}
	list := func(kind string) ([]tobj, error) {
		names, err := a.nft.List(ctx, kind)
		if err != nil && !knftables.IsNotFound(err) {
			return nil, err
		}
		out := make([]tobj, len(names))
		for i, n := range names {
			out[i] = tobj{"", n}
		}
		return out, nil
	}
	if chains, err = list("chains"); err != nil {
		return nil, nil, err
	}
	if sets, err = list("sets"); err != nil {
		return chains, nil, err
	}
	maps, err := list("maps")
	return chains, append(sets, maps...), err
}

// Script renders ops as the nft script the text applier would run (for
// tests and --dump of a plan).
func script(family knftables.Family, ops []op) string {
	nft := knftables.NewFake(family, TableName)
	if slices.ContainsFunc(ops, func(o op) bool { return tableRef(objTable(o.obj)) != "" }) {
		nft = knftables.NewFake("", "")
	}
	tx, err := transaction(nft, family, ops)
	if err != nil {
		return "# ERROR: " + err.Error()
	}
	return strings.TrimSpace(tx.String())
}
