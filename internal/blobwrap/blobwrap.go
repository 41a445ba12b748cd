// Package blobwrap holds what every driver.Bucket that wraps a
// *blob.Bucket forwards the same way (internal/objstats counts calls,
// faultbucket injects faults): a HEAD and a LIST page, turned
// back from the portable types into the driver's.
package blobwrap

import (
	"cmp"
	"context"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
)

// Attributes is inner's attributes of key, as a driver returns them.
func Attributes(ctx context.Context, inner *blob.Bucket, key string) (*driver.Attributes, error) {
	a, err := inner.Attributes(ctx, key)
	if err != nil {
		return nil, err
	}
	return &driver.Attributes{
		CacheControl: a.CacheControl, ContentDisposition: a.ContentDisposition, ContentEncoding: a.ContentEncoding,
		ContentLanguage: a.ContentLanguage, ContentType: a.ContentType, Metadata: a.Metadata,
		CreateTime: a.CreateTime, ModTime: a.ModTime, Size: a.Size, MD5: a.MD5, ETag: a.ETag,
	}, nil
}

// ListPage is one page of inner's listing, as a driver returns it (a page
// size of 0 means 1000).
func ListPage(ctx context.Context, inner *blob.Bucket, opts *driver.ListOptions) (*driver.ListPage, error) {
	token := opts.PageToken
	if token == nil {
		token = blob.FirstPageToken
	}
	objs, next, err := inner.ListPage(ctx, token, cmp.Or(max(opts.PageSize, 0), 1000), &blob.ListOptions{Prefix: opts.Prefix, Delimiter: opts.Delimiter})
	if err != nil {
		return nil, err
	}
	page := &driver.ListPage{NextPageToken: next}
	for _, o := range objs {
		page.Objects = append(page.Objects, &driver.ListObject{Key: o.Key, ModTime: o.ModTime, Size: o.Size, MD5: o.MD5, IsDir: o.IsDir})
	}
	return page, nil
}
