package memory

// matchGlob reports whether name matches pattern with the semantics of
// Redis's stringmatchlen (SCAN MATCH, KEYS): * any run, ? one byte, [abc],
// [^abc], [a-z] (either order), \x a literal x, a trailing \ or an
// unterminated [ matching literally as Redis's C code does. It works on
// bytes, as Redis does. path.Match differs ('*' stops at '/', errors on a
// bad pattern), so this is a port rather than a reuse.
func matchGlob(pattern, name string) bool {
	if pattern == "*" {
		return true // SCAN and KEYS skip matching for "*", so it takes even ""
	}
	skipLonger := false
	return globAt(pattern, name, &skipLonger)
}

func globAt(p, s string, skipLonger *bool) bool {
	pi, si := 0, 0
	// pat reads the pattern like the C string it is in Redis: 0 past the end.
	pat := func(k int) byte {
		if pi+k < len(p) {
			return p[pi+k]
		}
		return 0
	}
	for pi < len(p) && si < len(s) {
		switch p[pi] {
		case '*':
			for pi+1 < len(p) && p[pi+1] == '*' {
				pi++
			}
			if pi == len(p)-1 {
				return true
			}
			for si < len(s) {
				if globAt(p[pi+1:], s[si:], skipLonger) {
					return true
				}
				if *skipLonger {
					return false
				}
				si++
			}
			// Nothing after this * matches anywhere in the rest of the
			// string, so a longer match for an earlier * cannot help
			// either (Redis's guard against exponential backtracking).
			*skipLonger = true
			return false
		case '?':
			si++
		case '[':
			pi++
			not := pat(0) == '^'
			if not {
				pi++
			}
			match := false
			for {
				rest := len(p) - pi
				if pat(0) == '\\' && rest >= 2 {
					pi++
					if p[pi] == s[si] {
						match = true
					}
				} else if pat(0) == ']' {
					break
				} else if rest == 0 {
					pi-- // unterminated class: step back so the advance below ends the pattern
					break
				} else if rest >= 3 && p[pi+1] == '-' {
					lo, hi := p[pi], p[pi+2]
					if lo > hi {
						lo, hi = hi, lo
					}
					if s[si] >= lo && s[si] <= hi {
						match = true
					}
					pi += 2
				} else if p[pi] == s[si] {
					match = true
				}
				pi++
			}
			if not {
				match = !match
			}
			if !match {
				return false
			}
			si++
		case '\\':
			if len(p)-pi >= 2 {
				pi++
			}
			fallthrough
		default:
			if p[pi] != s[si] {
				return false
			}
			si++
		}
		pi++
		if si == len(s) {
			for pi < len(p) && p[pi] == '*' {
				pi++
			}
			break
		}
	}
	return pi == len(p) && si == len(s)
}
