package nftables

import (
	"context"
	"strings"

	"sigs.k8s.io/knftables"
)

// applier programs a planned transaction; it is the only I/O of a sync.
type applier interface {
	// apply runs ops as one atomic transaction.
	apply(ctx context.Context, ops []op) error
	// list returns the chains and sets of the table (none when it does
	// not exist).
	list(ctx context.Context) (chains, sets []string, err error)
}

// partsApplier applies a sequence of transactions, one after the other,
// possibly preparing the next while the kernel commits the current one.
type partsApplier interface {
	applyParts(ctx context.Context, parts [][]op) error
}

// textApplier writes the transaction as an nft script through an NFT: the
// knftables.Fake of the tests, kpdiff and the golden files, or ExecNFT
// (`nft -f -`).
type textApplier struct{ nft NFT }

// transaction replays ops into a knftables transaction.
func transaction(nft NFT, ops []op) *knftables.Transaction {
	tx := nft.NewTransaction()
	for _, o := range ops {
		switch o.verb {
		case opAdd:
			tx.Add(o.obj)
		case opFlush:
			tx.Flush(o.obj)
		case opDelete:
			tx.Delete(o.obj)
		}
	}
	return tx
}

func (a *textApplier) apply(ctx context.Context, ops []op) error {
	return a.nft.Run(ctx, transaction(a.nft, ops))
}

func (a *textApplier) list(ctx context.Context) (chains, sets []string, err error) {
	chains, err = a.nft.List(ctx, "chains")
	if err != nil && !knftables.IsNotFound(err) {
		return nil, nil, err
	}
	sets, err = a.nft.List(ctx, "sets")
	if err != nil && !knftables.IsNotFound(err) {
		return chains, nil, err
	}
	maps, err := a.nft.List(ctx, "maps")
	if err != nil && !knftables.IsNotFound(err) {
		return chains, sets, err
	}
	return chains, append(sets, maps...), nil
}

// Script renders ops as the nft script the text applier would run (for
// tests and --dump of a plan).
func script(family knftables.Family, ops []op) string {
	tx := transaction(knftables.NewFake(family, TableName), ops)
	return strings.TrimSpace(tx.String())
}
