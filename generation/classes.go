package generation

import (
	"fmt"
	"strconv"
	"strings"

	"marspec/mar"
)

// Class names come from the pack: Fashion-MNIST's 10 or MAR's 1,000 ImageNet classes
// (placeholders class_000.. when exported without names). A request names a class by id, by
// name in any case, or by the slug its files use.

// classesListed is how many names an error lists in full. Past it (1,000 classes) an error
// gives the id range, the names that contain what was typed, and where the full list is, so a
// refusal stays readable.
const classesListed = 20

// namesShown is how many names containing the typed text an error suggests.
const namesShown = 5

// ParseClass reads one class: an id, a name (any case), the slug used in file names
// ("t-shirt-top"), or "all".
func ParseClass(man *mar.Manifest, s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "all") {
		ids := make([]int, len(man.Classes))
		for i := range ids {
			ids[i] = i
		}
		return ids, nil
	}
	if i, err := strconv.Atoi(s); err == nil {
		if i < 0 || i >= len(man.Classes) {
			return nil, fieldErr("class", i, classAllowed(man.Classes, ""), "")
		}
		return []int{i}, nil
	}
	for i, name := range man.Classes {
		if strings.EqualFold(name, s) || Slug(name) == strings.ToLower(s) {
			return []int{i}, nil
		}
	}
	return nil, fieldErr("class", strconv.Quote(s), classAllowed(man.Classes, s), "unknown")
}

// classAllowed says which classes a request may name: all names when there are few; else the
// range, the full list's place, and up to namesShown names containing typed.
func classAllowed(names []string, typed string) string {
	head := fmt.Sprintf("0 to %d, all, or a name", len(names)-1)
	if len(names) <= classesListed {
		return head + ": " + strings.Join(names, ", ")
	}
	out := fmt.Sprintf("%s (%d names: GET /v1/models or `marspec models` lists them)", head, len(names))
	if like := namesContaining(names, typed); len(like) > 0 {
		out += "; names containing " + strconv.Quote(typed) + ": " + strings.Join(like, ", ")
	}
	return out
}

// namesContaining is up to namesShown names that contain typed (any case, or as a slug),
// with "and N more" when there are more.
func namesContaining(names []string, typed string) []string {
	typed = strings.ToLower(strings.TrimSpace(typed))
	if typed == "" {
		return nil
	}
	var found []string
	more := 0
	for _, name := range names {
		if !strings.Contains(strings.ToLower(name), typed) && !strings.Contains(Slug(name), Slug(typed)) {
			continue
		}
		if len(found) == namesShown {
			more++
			continue
		}
		found = append(found, name)
	}
	if more > 0 {
		found = append(found, fmt.Sprintf("and %d more", more))
	}
	return found
}

// Slug is a class name as used in file names: lower case, other characters as '-'.
func Slug(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r - 'A' + 'a'
		}
		return '-'
	}, s)
}

// ShortClassList is how many classes `marspec models` lists before a count of the rest.
const ShortClassList = 10

// ClassList writes classes as "0=T-shirt/top (t-shirt-top), 1=Trouser, ...": each id, name
// and, where it differs, the slug file names use (also accepted by --class). Unless all, only
// the first ShortClassList, then "... and N more; --classes to list all".
func ClassList(classes []string, all bool) string {
	n := len(classes)
	if !all {
		n = min(n, ShortClassList)
	}
	parts := make([]string, n)
	for i, c := range classes[:n] {
		parts[i] = fmt.Sprintf("%d=%s", i, c)
		if slug := Slug(c); slug != strings.ToLower(c) {
			parts[i] += " (" + slug + ")"
		}
	}
	s := strings.Join(parts, ", ")
	if rest := len(classes) - n; rest > 0 {
		s += fmt.Sprintf(", ... and %d more; --classes to list all", rest)
	}
	return s
}
