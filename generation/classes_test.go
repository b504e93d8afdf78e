package generation

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"marspec/mar"
)

// imagenetLike is a manifest with MAR's 1,000 classes: placeholders with a few real names
// among them, as a pack exported with --class-names would have.
func imagenetLike() *mar.Manifest {
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("class_%03d", i)
	}
	names[281], names[282], names[285], names[207] = "tabby cat", "tiger cat", "Egyptian cat", "golden retriever"
	return &mar.Manifest{Classes: names}
}

func TestParseClassAmongAThousand(t *testing.T) {
	man := imagenetLike()
	for in, want := range map[string]int{"999": 999, "0": 0, "Tiger Cat": 282, "golden-retriever": 207, "class_500": 500} {
		got, err := ParseClass(man, in)
		if err != nil || len(got) != 1 || got[0] != want {
			t.Errorf("class %q: got %v, %v; want %d", in, got, err, want)
		}
	}
	if all, err := ParseClass(man, "all"); err != nil || len(all) != 1000 {
		t.Errorf("all: %d classes, %v; want 1000", len(all), err)
	}
}

// A refusal among 1,000 classes names the range, where the list is and the names like the one
// typed, and stays short: it does not print all 1,000.
func TestUnknownClassErrorStaysShort(t *testing.T) {
	man := imagenetLike()
	for _, c := range []struct {
		in   string
		want []string
		not  []string
	}{
		{"cat", []string{`class "cat": unknown`, "0 to 999, all, or a name", "1000 names", `names containing "cat": tabby cat, tiger cat, Egyptian cat`},
			[]string{"class_000"}},
		{"1000", []string{"class 1000: out of range", "0 to 999"}, []string{"names containing"}},
		{"-1", []string{"class -1: out of range"}, nil},
		{"zebra", []string{`class "zebra": unknown`, "GET /v1/models"}, []string{"names containing"}},
		{"class_00x", nil, []string{"names containing"}},
	} {
		_, err := ParseClass(man, c.in)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "class" {
			t.Errorf("class %q: %v, want a FieldError on class", c.in, err)
			continue
		}
		msg := err.Error()
		if len(msg) > 400 {
			t.Errorf("class %q: the error is %d characters long: %s", c.in, len(msg), msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("class %q: error %q lacks %q", c.in, msg, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(msg, n) {
				t.Errorf("class %q: error %q has %q", c.in, msg, n)
			}
		}
	}
	// "class_00" is no name, but ten names contain it: five are named, the other five counted
	_, err := ParseClass(man, "class_00")
	if msg := fmt.Sprint(err); !strings.Contains(msg, "class_000, class_001, class_002, class_003, class_004, and 5 more") {
		t.Errorf("class_00: %q, want five names containing it and the other five counted", msg)
	}
}

// With few classes (Fashion-MNIST's 10) every name is listed, as before.
func TestUnknownClassListsFewNames(t *testing.T) {
	_, cat := TestModels()
	_, err := ParseClass(cat.Target, "dog")
	if msg := fmt.Sprint(err); !strings.Contains(msg, "0 to 2, all, or a name: T-shirt/top, Trouser, Pullover") {
		t.Errorf("error %q does not list the three names", msg)
	}
}

// A long class list shows its first names and a count of the rest; all shows every one.
func TestClassListShortAndAll(t *testing.T) {
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
	}
	names[1] = "T-shirt/top"
	short := ClassList(names, false)
	if want := "0=n0, 1=T-shirt/top (t-shirt-top), 2=n2, 3=n3, 4=n4, 5=n5, 6=n6, 7=n7, 8=n8, 9=n9, ... and 990 more; --classes to list all"; short != want {
		t.Errorf("short list %q, want %q", short, want)
	}
	if all := ClassList(names, true); !strings.HasSuffix(all, ", 998=n998, 999=n999") || strings.Contains(all, "more") {
		t.Errorf("full list ends %q", all[len(all)-40:])
	}
	if ten := ClassList(names[:10], false); strings.Contains(ten, "more") || !strings.HasSuffix(ten, "9=n9") {
		t.Errorf("ten classes: %q", ten)
	}
}
