package policy

// node is one level of the host index: a trie over labels read from the
// right, as DNS delegates. A decision walks the host's labels once, taking
// the exact child and the "*" child at each level, and collects the "**"
// rules of every node it passes with labels still left. Its cost is bounded
// by the labels of the host and the wildcard branching of the patterns,
// never by the number of rules.
type node struct {
	exact    map[string]*node
	star     *node   // "*": any one label
	terminal []int32 // rules whose pattern ends at this node
	glob     []int32 // rules with "**" left of this node: one or more labels
}

// insert adds the pattern labels (left to right) for rule num. Rules are
// inserted in ascending order, so each list stays sorted; a rule naming one
// pattern twice is stored once.
func (n *node) insert(labels []string, num int32) {
	for i := len(labels) - 1; i >= 0; i-- {
		switch l := labels[i]; l {
		case "**":
			n.glob = appendOnce(n.glob, num)
			return
		case "*":
			if n.star == nil {
				n.star = &node{}
			}
			n = n.star
		default:
			c := n.exact[l]
			if c == nil {
				if n.exact == nil {
					n.exact = make(map[string]*node)
				}
				c = &node{}
				n.exact[l] = c
			}
			n = c
		}
	}
	n.terminal = appendOnce(n.terminal, num)
}

func appendOnce(s []int32, v int32) []int32 {
	if len(s) > 0 && s[len(s)-1] == v {
		return s
	}
	return append(s, v)
}

// walk visits every rule whose pattern matches the labels still in rest
// (more reports whether any are left). Substrings of the host are map keys
// as they are: nothing is split or copied.
func (n *node) walk(rest string, more bool, st *walkState) {
	if !more {
		st.visit(n.terminal)
		return
	}
	if len(n.glob) > 0 {
		st.visit(n.glob)
	}
	label, rest, more := lastLabel(rest)
	if c := n.exact[label]; c != nil {
		c.walk(rest, more, st)
	}
	if n.star != nil {
		n.star.walk(rest, more, st)
	}
}

// walkState collects the outcome of one walk. The walk costs the host's
// labels times the wildcard branching, plus one test per rule whose pattern
// matches the host (a selector test per policy among them): output-
// sensitive, independent of the rules that do not match.
type walkState struct {
	s       *Snapshot
	client  *Client
	port    int
	best    int32 // smallest rule number that allows; -1 while none
	matched bool  // a rule of a selecting policy names the host
	// initOnly: a phase-init rule of a selecting policy would allow host
	// and port, but the client is initialized.
	initOnly bool
	lastPol  int32 // the policy tested last (-1: none) and its outcome:
	lastSel  bool  // rules of one policy come in a row
}

func (st *walkState) visit(rules []int32) {
	for _, num := range rules {
		if st.best >= 0 && num >= st.best {
			return // sorted: nothing here can take precedence
		}
		r := &st.s.rules[num]
		if r.pol != st.lastPol {
			st.lastPol, st.lastSel = r.pol, st.s.pols[r.pol].selects(st.client)
		}
		if !st.lastSel {
			continue
		}
		if !r.allowsPort(st.port) {
			st.matched = true
			continue
		}
		if r.initOnly && st.client.Initialized {
			st.initOnly = true
			continue
		}
		st.best = num
		return
	}
}
