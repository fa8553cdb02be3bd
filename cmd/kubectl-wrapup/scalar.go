package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// srcPos is a position in a document's text: 1-based line (of the
// document) and column (in characters).
type srcPos struct{ line, col int }

// scalarPositions gives, for each character of the scalar n's value, where
// it is in lines (the document's text): through block scalars (|, >, with
// their chomping), quoted strings with escapes and folded lines, and plain
// scalars over several lines. It returns nil when the text cannot be walked
// to exactly the value the YAML decoder read, so that a caller never points
// at the wrong place.
func scalarPositions(lines []string, n *kyaml.Node) []srcPos {
	if n == nil || n.Kind != kyaml.ScalarNode || n.Line < 1 || n.Line > len(lines) {
		return nil
	}
	var got []rune
	var at []srcPos
	emit := func(r rune, p srcPos) {
		got = append(got, r)
		at = append(at, p)
	}
	if n.Anchor != "" || n.Style&kyaml.TaggedStyle != 0 {
		// "&name value", "!!str value": not walked (lint points at the
		// value).
		return nil
	}
	switch {
	case n.Style&(kyaml.LiteralStyle|kyaml.FoldedStyle) != 0:
		blockScalar(lines, n, emit)
	case n.Style&kyaml.DoubleQuotedStyle != 0:
		quotedScalar(lines, n, true, emit)
	case n.Style&kyaml.SingleQuotedStyle != 0:
		quotedScalar(lines, n, false, emit)
	default:
		plainScalar(lines, n, []rune(n.Value), emit)
	}
	want := []rune(n.Value)
	if len(got) < len(want) || string(got[:len(want)]) != n.Value {
		return nil
	}
	// What is left is what chomping drops (line breaks).
	if strings.Trim(string(got[len(want):]), "\n") != "" {
		return nil
	}
	return at[:len(want)]
}

// indentOf is the number of leading spaces of s.
func indentOf(s string) int { return len(s) - len(strings.TrimLeft(s, " ")) }

// runeCol is the 1-based character column of byte offset i of s.
func runeCol(s string, i int) int { return utf8.RuneCountInString(s[:i]) + 1 }

// blockScalar walks a | or > scalar, whose indicator is on n's line.
func blockScalar(lines []string, n *kyaml.Node, emit func(rune, srcPos)) {
	header := lines[n.Line-1]
	// The indicators after | or > (chomping, indentation), up to a space
	// or a comment.
	ind := header[strings.LastIndexAny(header, "|>")+1:]
	if i := strings.IndexAny(ind, " \t#"); i >= 0 {
		ind = ind[:i]
	}
	if strings.ContainsAny(ind, "123456789") {
		return // an explicit indentation indicator: not walked
	}
	first := n.Line // 0-based index of the first content line
	indent := -1
	end := first
	for i := first; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], "\r")
		if strings.TrimSpace(l) == "" {
			end = i + 1
			continue
		}
		if indent < 0 {
			indent = indentOf(l)
		}
		if indentOf(l) < indent {
			break
		}
		end = i + 1
	}
	if indent <= 0 {
		return
	}
	content := func(i int) string {
		l := strings.TrimRight(lines[i], "\r")
		if len(l) < indent {
			return ""
		}
		return l[indent:]
	}
	eol := func(i int) srcPos {
		l := strings.TrimRight(lines[i], "\r")
		return srcPos{i + 1, utf8.RuneCountInString(l) + 1}
	}
	text := func(i int) {
		l := strings.TrimRight(lines[i], "\r")
		for j, r := range content(i) {
			emit(r, srcPos{i + 1, runeCol(l, indent+j)})
		}
	}
	if n.Style&kyaml.LiteralStyle != 0 {
		for i := first; i < end; i++ {
			text(i)
			emit('\n', eol(i))
		}
		return
	}
	// Folded: a break between two lines of text becomes a space; blank
	// lines between them are kept as breaks; lines more indented than the
	// block (or starting with a tab) keep their breaks.
	more := func(i int) bool {
		c := content(i)
		return c != "" && (c[0] == ' ' || c[0] == '\t')
	}
	prev := -1
	blanks := 0
	for i := first; i < end; i++ {
		if content(i) == "" {
			blanks++
			continue
		}
		if prev >= 0 {
			switch {
			case blanks == 0 && !more(prev) && !more(i):
				emit(' ', eol(prev))
			case !more(prev) && !more(i):
				for k := 0; k < blanks; k++ {
					emit('\n', eol(prev+k))
				}
			default:
				for k := 0; k <= blanks; k++ {
					emit('\n', eol(prev+k))
				}
			}
		}
		text(i)
		prev, blanks = i, 0
	}
	if prev >= 0 {
		emit('\n', eol(prev))
	}
}

// quotedScalar walks a "..." (double) or '...' scalar that starts at n's
// line and column.
func quotedScalar(lines []string, n *kyaml.Node, double bool, emit func(rune, srcPos)) {
	li := n.Line - 1
	line := []rune(strings.TrimRight(lines[li], "\r"))
	ci := n.Column    // the character after the opening quote (Column is 1-based)
	var pend []srcPos // whitespace emitted at the end of the current line
	var pendR []rune
	flush := func() {
		for k, r := range pendR {
			emit(r, pend[k])
		}
		pend, pendR = nil, nil
	}
	for {
		if ci >= len(line) {
			// A line break inside the quotes: trailing white space is
			// dropped, the break folds to a space, or to breaks for each
			// blank line; the next line's leading white space is dropped.
			pend, pendR = nil, nil
			var ok bool
			if li, line, ci, _, ok = foldLineBreak(lines, li, line, emit); !ok {
				return
			}
			continue
		}
		r := line[ci]
		p := srcPos{li + 1, ci + 1}
		switch {
		case !double && r == '\'':
			if ci+1 < len(line) && line[ci+1] == '\'' {
				flush()
				emit('\'', p)
				ci += 2
				continue
			}
			flush()
			return
		case double && r == '"':
			flush()
			return
		case double && r == '\\':
			flush()
			if ci+1 >= len(line) {
				// An escaped line break: nothing, and the next line's
				// leading white space is dropped.
				li++
				if li >= len(lines) {
					return
				}
				line = []rune(strings.TrimRight(lines[li], "\r"))
				ci = 0
				for ci < len(line) && (line[ci] == ' ' || line[ci] == '\t') {
					ci++
				}
				continue
			}
			e := line[ci+1]
			if v, ok := simpleEscapes[e]; ok {
				emit(v, p)
				ci += 2
				continue
			}
			width := map[rune]int{'x': 2, 'u': 4, 'U': 8}[e]
			if width == 0 || ci+2+width > len(line) {
				return
			}
			v, err := strconv.ParseUint(string(line[ci+2:ci+2+width]), 16, 32)
			if err != nil {
				return
			}
			emit(rune(v), p)
			ci += 2 + width
		case r == ' ' || r == '\t':
			pend, pendR = append(pend, p), append(pendR, r)
			ci++
		default:
			flush()
			emit(r, p)
			ci++
		}
	}
}

// foldLineBreak folds the line break after line li of a flow scalar (plain
// or quoted): a space, or a break for each blank line that follows, at the
// end of line li; it returns the next line with text, where its text starts
// (leading white space dropped), how many characters it emitted, and false
// when the text ends first.
func foldLineBreak(lines []string, li int, line []rune, emit func(rune, srcPos)) (int, []rune, int, int, bool) {
	breakAt := srcPos{li + 1, len(line) + 1}
	blanks := 0
	for {
		li++
		if li >= len(lines) {
			return li, nil, 0, 0, false
		}
		line = []rune(strings.TrimRight(lines[li], "\r"))
		if strings.TrimSpace(string(line)) != "" {
			break
		}
		blanks++
	}
	emitted := 0
	if blanks == 0 {
		emit(' ', breakAt)
		emitted++
	}
	for k := 0; k < blanks; k++ {
		emit('\n', breakAt)
		emitted++
	}
	ci := 0
	for ci < len(line) && (line[ci] == ' ' || line[ci] == '\t') {
		ci++
	}
	return li, line, ci, emitted, true
}

// simpleEscapes are YAML's one-character escapes in double quotes.
var simpleEscapes = map[rune]rune{
	'0': 0, 'a': '\a', 'b': '\b', 't': '\t', '\t': '\t', 'n': '\n', 'v': '\v', 'f': '\f', 'r': '\r',
	'e': 0x1b, ' ': ' ', '"': '"', '/': '/', '\\': '\\', 'N': 0x85, '_': 0xa0, 'L': 0x2028, 'P': 0x2029,
}

// plainScalar walks a plain scalar: its lines, folded as for quotes, up to
// the length of want.
func plainScalar(lines []string, n *kyaml.Node, want []rune, emit func(rune, srcPos)) {
	li := n.Line - 1
	line := []rune(strings.TrimRight(lines[li], "\r"))
	ci := n.Column - 1
	count := 0
	for count < len(want) {
		if ci >= len(line) {
			var emitted int
			var ok bool
			if li, line, ci, emitted, ok = foldLineBreak(lines, li, line, emit); !ok {
				return
			}
			count += emitted
			continue
		}
		emit(line[ci], srcPos{li + 1, ci + 1})
		ci++
		count++
	}
}

// celPosition is a "line:column: " that CEL's messages start with.
var celPosition = regexp.MustCompile(`^(\d+):(\d+): `)

// exprOffset is the character offset in expr of CEL's line and column
// (both 1-based, as the messages print them); -1 when expr has no such
// place.
func exprOffset(expr string, line, col int) int {
	rs := []rune(expr)
	off := 0
	for l := 1; l < line; l++ {
		i := indexRune(rs[off:], '\n')
		if i < 0 {
			return -1
		}
		off += i + 1
	}
	off += col - 1
	if off < 0 || off > len(rs) {
		return -1
	}
	return off
}

func indexRune(rs []rune, r rune) int {
	for i, x := range rs {
		if x == r {
			return i
		}
	}
	return -1
}

// placeExpressions points each finding on a CEL expression of d (at
// prefix+field: prefix is "items[i]." in a List) whose message starts with
// CEL's "line:column: " at that place in the file, through block scalars
// and quoted strings: "file:line:column" of the character. The message is
// kept as the controller writes it on the rule's status. A finding whose
// place cannot be found keeps the field's position.
func (d *document) placeExpressions(prefix string, fs []finding) []finding {
	lines := strings.Split(string(d.Data), "\n")
	out := make([]finding, 0, len(fs))
	for _, f := range fs {
		if m := celPosition.FindStringSubmatch(f.Message); m != nil {
			if n := d.nodeAt(prefix + f.Field); n != nil {
				line, _ := strconv.Atoi(m[1])
				col, _ := strconv.Atoi(m[2])
				if at := scalarPositions(lines, n); len(at) > 0 {
					if off := exprOffset(n.Value, line, col); off >= 0 {
						rs := []rune(n.Value)
						past := off >= len(rs)
						if past {
							// Past the end (an unfinished expression):
							// after its last character that is not a
							// line break.
							off = len(rs) - 1
							for off > 0 && rs[off] == '\n' {
								off--
							}
						}
						p := at[max(off, 0)]
						if past {
							p.col++
						}
						f.At = fmt.Sprintf("%s:%d:%d", d.File, d.Start+p.line-1, p.col)
					}
				}
			}
		}
		out = append(out, f)
	}
	return out
}
