package state

import (
	"slices"
	"strings"
)

// TxnListOp reads the transactions of the view.
type TxnListOp struct {
	BaseOp
	IDs []string
	Out []Transaction
}

func (o *TxnListOp) Check(g *Group) {
	if o.IDs != nil {
		for _, id := range o.IDs {
			if t := g.Spec.txn(id); t != nil {
				o.Out = append(o.Out, *t.clone())
			}
		}
		return
	}
	g.Spec.eachTxn(func(t *Transaction) { o.Out = append(o.Out, *t.clone()) })
	slices.SortFunc(o.Out, func(a, b Transaction) int { return strings.Compare(a.ID, b.ID) })
}
