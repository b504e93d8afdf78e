package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3 is a Blobs in a bucket of an S3-compatible object store, addressed path-style
// (http://HOST:PORT/BUCKET/KEY), which every S3 server accepts. It uses minio-go rather than
// aws-sdk-go-v2: one module instead of a dozen, path-style and static or environment
// credentials in one options struct, and it speaks to any S3 server, AWS included. A PutObject
// makes the whole object appear at once, which is the atomicity Blobs asks for.
type S3 struct {
	c      *minio.Client
	bucket string
}

// blobTimeout bounds one object operation: a store that stops answering fails the image
// (and so the job, with the reason) instead of hanging a worker.
const blobTimeout = 30 * time.Second

// OpenS3 connects to s3://[KEY:SECRET@]BUCKET?endpoint=http://HOST:PORT&region=R; without
// KEY:SECRET in the URL the credentials are AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
// The endpoint defaults to AWS (https://s3.amazonaws.com), the region to us-east-1. The
// bucket is made if it does not exist (a fresh local server needs no other tool).
func OpenS3(raw string) (*S3, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "s3" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("not an S3 URL (allowed: s3://BUCKET?endpoint=http://HOST:PORT&region=R)")
	}
	q := u.Query()
	for k := range q {
		if k != "endpoint" && k != "region" {
			return nil, fmt.Errorf("unknown parameter %q (allowed: endpoint, region)", k)
		}
	}
	endpoint := q.Get("endpoint")
	if endpoint == "" {
		endpoint = "https://s3.amazonaws.com"
	}
	ep, err := url.Parse(endpoint)
	if err != nil || (ep.Scheme != "http" && ep.Scheme != "https") || ep.Host == "" || (ep.Path != "" && ep.Path != "/") {
		return nil, fmt.Errorf("endpoint %q is not http://HOST:PORT or https://HOST:PORT", endpoint)
	}
	region := q.Get("region")
	if region == "" {
		region = "us-east-1"
	}
	var creds *credentials.Credentials
	switch {
	case u.User != nil:
		secret, _ := u.User.Password()
		creds = credentials.NewStaticV4(u.User.Username(), secret, "")
	case os.Getenv("AWS_ACCESS_KEY_ID") != "" && os.Getenv("AWS_SECRET_ACCESS_KEY") != "":
		creds = credentials.NewEnvAWS()
	default:
		return nil, errors.New("no credentials: put KEY:SECRET@ in the URL or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	c, err := minio.New(ep.Host, &minio.Options{Creds: creds, Secure: ep.Scheme == "https", Region: region,
		BucketLookup: minio.BucketLookupPath, MaxRetries: 3}) // a few retries, then the job fails with the reason
	if err != nil {
		return nil, err
	}
	s := &S3{c: c, bucket: u.Host}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok, err := c.BucketExists(ctx, s.bucket)
	if err != nil {
		return nil, fmt.Errorf("bucket %s at %s: %w", s.bucket, endpoint, err)
	}
	if !ok {
		if err := c.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: region}); err != nil && !madeByAnother(ctx, c, s.bucket, err) {
			return nil, fmt.Errorf("making bucket %s at %s: %w", s.bucket, endpoint, err)
		}
	}
	return s, nil
}

// madeByAnother says whether a failed MakeBucket lost a race rather than failed: replicas
// started together all find no bucket, all make it, and all but one are told it exists
// (BucketAlreadyOwnedByYou with the same credentials). Asking again settles it; a bucket that
// still does not exist means the error was real.
func madeByAnother(ctx context.Context, c *minio.Client, bucket string, makeErr error) bool {
	switch minio.ToErrorResponse(makeErr).Code {
	case "BucketAlreadyOwnedByYou", "BucketAlreadyExists":
	default:
		return false
	}
	ok, err := c.BucketExists(ctx, bucket)
	return err == nil && ok
}

// checkKey refuses keys that are not relative paths inside the store ("JOB/INDEX.png"): the
// same keys as Files, so the two cannot differ in what they accept.
func checkKey(key string) error {
	if !filepath.IsLocal(key) || strings.Contains(key, `\`) {
		return fmt.Errorf("blob key %q is not a local path", key)
	}
	return nil
}

// Put writes an object; writing a key again replaces it (the bytes are the same: images are
// deterministic).
func (s *S3) Put(key string, data []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), blobTimeout)
	defer cancel()
	_, err := s.c.PutObject(ctx, s.bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{ContentType: "image/png"})
	if err != nil {
		return fmt.Errorf("S3 put %s: %w", key, blobErr(err))
	}
	return nil
}

// Get reads an object; ErrNotFound if there is none.
func (s *S3) Get(key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), blobTimeout)
	defer cancel()
	obj, err := s.c.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err == nil {
		defer obj.Close()
		var data []byte
		if data, err = io.ReadAll(obj); err == nil {
			return data, nil
		}
	}
	if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
		return nil, fmt.Errorf("object %s missing: %w", key, ErrNotFound)
	}
	return nil, fmt.Errorf("S3 get %s: %w", key, blobErr(err))
}

// Delete removes one object (S3 answers a missing key as deleted: no ErrNotFound).
func (s *S3) Delete(key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), blobTimeout)
	defer cancel()
	if err := s.c.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("S3 delete %s: %w", key, blobErr(err))
	}
	return nil
}

// Keys calls each with every object's key.
func (s *S3) Keys(each func(key string) error) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for o := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			return fmt.Errorf("S3 list: %w", blobErr(o.Err))
		}
		if err := each(o.Key); err != nil {
			return err
		}
	}
	return nil
}

// DeleteJob removes every object under "JOB/".
func (s *S3) DeleteJob(job string) error {
	if err := checkKey(job); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), blobTimeout)
	defer cancel()
	objs := s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: job + "/", Recursive: true})
	var listErr error
	keys := make(chan minio.ObjectInfo)
	go func() {
		defer close(keys)
		for o := range objs {
			if o.Err != nil {
				listErr = o.Err
				continue
			}
			keys <- o
		}
	}()
	var errs []error
	for e := range s.c.RemoveObjects(ctx, s.bucket, keys, minio.RemoveObjectsOptions{}) {
		errs = append(errs, fmt.Errorf("S3 delete %s: %w", e.ObjectName, blobErr(e.Err)))
	}
	if listErr != nil {
		errs = append(errs, fmt.Errorf("S3 list %s/: %w", job, blobErr(listErr)))
	}
	return errors.Join(errs...)
}
