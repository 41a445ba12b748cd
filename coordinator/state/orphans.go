package state

type KnownKeysOp struct {
	BaseOp
	Keys  []string
	Known map[string]bool
}

func (o *KnownKeysOp) Need(n *Needs) { n.Keys = append(n.Keys, o.Keys...) }

func (o *KnownKeysOp) Check(g *Group) {
	o.Known = map[string]bool{}
	for _, k := range o.Keys {
		_, found, err := g.Facts.object(k)
		if err != nil {
			o.Finish(err)
			return
		}
		if pending, _ := g.Spec.pending(k); pending || found {
			o.Known[k] = true
		}
	}
}
