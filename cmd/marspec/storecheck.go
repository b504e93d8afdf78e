package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"marspec/server"
)

// runStore is `marspec store check [--repair]`: the orphans of a store both ways (objects
// without a record, records without an object), found by reading every job and listing every
// object, safe while servers use the store (it looks at each suspect again after the listing);
// --repair removes the objects and the dangling records, and puts the jobs that lost
// an image back to the queue to make it again. The store is named as serve names it.
func runStore(args []string) error {
	if len(args) == 0 || args[0] != "check" {
		return fmt.Errorf("usage: marspec store check [--repair] [--store URL] [--blobs URL] [--data-dir DIR] [--write-timeout D]")
	}
	fs := flag.NewFlagSet("store check", flag.ContinueOnError)
	cfg := server.DefaultConfig()
	repair := fs.Bool("repair", false, "remove objects without a record and records without an object (their jobs are queued to make the image again), and expired jobs not swept yet")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "the embedded store's folder (as serve --data-dir)")
	cfg.Store, _ = os.LookupEnv("MARSPEC_STORE")
	cfg.Blobs, _ = os.LookupEnv("MARSPEC_BLOBS")
	fs.StringVar(&cfg.Store, "store", cfg.Store, "jobs and image records, as serve --store ($MARSPEC_STORE)")
	fs.StringVar(&cfg.Blobs, "blobs", cfg.Blobs, "image bytes, as serve --blobs ($MARSPEC_BLOBS)")
	if v, ok := os.LookupEnv("MARSPEC_WRITE_TIMEOUT"); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("$MARSPEC_WRITE_TIMEOUT %q is not a duration (e.g. 90s)", v)
		}
		cfg.WriteTimeout = d
	}
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", cfg.WriteTimeout, "the servers' --write-timeout: a job counts as expired once its retention ended this long ago, when their sweep removes it ($MARSPEC_WRITE_TIMEOUT)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if err := cfg.Check(); err != nil {
		return err
	}
	st, err := server.OpenStore(cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	o, err := st.Check(server.SweepGrace(cfg))
	if err != nil {
		return err
	}
	for _, key := range o.ObjectsWithoutRecord {
		fmt.Println("object without a record:", key)
	}
	for _, id := range o.RecordsWithoutObject {
		fmt.Println("record without an object:", id)
	}
	for _, id := range o.Expired {
		fmt.Println("expired, not swept yet:", id)
	}
	found := len(o.ObjectsWithoutRecord) + len(o.RecordsWithoutObject)
	fmt.Printf("%d jobs and %d objects checked; %d objects without a record, %d records without an object\n",
		o.JobsChecked, o.ObjectsChecked, len(o.ObjectsWithoutRecord), len(o.RecordsWithoutObject))
	if len(o.Expired) > 0 { // no orphans: a running server's sweep removes them, --repair now
		fmt.Printf("%d finished jobs past their retention wait for the sweep\n", len(o.Expired))
	}
	switch {
	case found == 0 && (!*repair || len(o.Expired) == 0):
		return nil
	case !*repair:
		return fmt.Errorf("%d orphans (marspec store check --repair removes them)", found)
	}
	if err := st.Repair(o); err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	fmt.Printf("repaired: %d expired jobs removed, %d objects removed, %d records removed and their jobs queued to make the images again\n",
		len(o.Expired), len(o.ObjectsWithoutRecord), len(o.RecordsWithoutObject))
	return nil
}
