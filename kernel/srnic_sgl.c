// SPDX-License-Identifier: GPL-2.0
/*
 * srnic: scatter/gather lists, the one place payload moves between
 * memory and packets: SGEs resolved to referenced MRs (srnic_sgl_get()),
 * copies between SGLs (local delivery), between an SGL and a kernel
 * buffer (inline data, atomics, packet building), and from a received
 * packet's linear data and fragments into an SGL or an MR. Every copy of an
 * MR's bytes goes through srnic_mr.c's copy API (ODP faults included).
 */

#include <linux/skbuff.h>

#include <linux/slab.h>

#include "srnic.h"
#include "srnic_wire.h"

/**
 * srnic_sgl_put() - drop the MR references of an SGL and empty it
 * @sgl: the SGL
 */
void srnic_sgl_put(struct srnic_sgl *sgl)
{
	unsigned int i;

	for (i = 0; i < sgl->num; i++)
		if (sgl->seg[i].mr)
			srnic_mr_put(sgl->seg[i].mr);
	sgl->num = 0;
	sgl->len = 0;
}

/**
 * srnic_sgl_alloc() - room for the pieces of a message
 * @sgl: an SGL, all zero
 * @max: the most SGEs a message of the queue it serves carries (at least
 *	 one piece is made room for: inline data)
 *
 * Return: 0 or -ENOMEM.
 */
int srnic_sgl_alloc(struct srnic_sgl *sgl, unsigned int max)
{
	max = clamp_t(unsigned int, max, 1, SRNIC_MAX_SGE);
	sgl->seg = kcalloc(max, sizeof(*sgl->seg), GFP_KERNEL);
	if (!sgl->seg)
		return -ENOMEM;
	sgl->max = max;
	return 0;
}

/**
 * srnic_sgl_free() - undo srnic_sgl_alloc()
 * @sgl: an SGL holding no MR (srnic_sgl_put()), or never allocated
 */
void srnic_sgl_free(struct srnic_sgl *sgl)
{
	kfree(sgl->seg);
	sgl->seg = NULL;
	sgl->max = 0;
}

/**
 * srnic_sgl_get() - resolve SGEs to referenced MRs
 * @sdev: the device
 * @pd: the PD the MRs must belong to
 * @sge: SGEs copied from a ring, so untrusted
 * @num: how many
 * @access: access the MRs must grant
 * @sgl: the result; zero-length SGEs are skipped
 *
 * Return: IB_WC_SUCCESS, IB_WC_LOC_PROT_ERR or IB_WC_LOC_LEN_ERR.
 */
enum ib_wc_status srnic_sgl_get(struct srnic_dev *sdev, struct srnic_pd *pd,
				const struct srnic_sge *sge, unsigned int num,
				int access, struct srnic_sgl *sgl)
{
	unsigned int i;

	sgl->num = 0;
	sgl->len = 0;
	/* Callers bound @num by the queue's max_sge, which sized @sgl. */
	if (WARN_ON_ONCE(num > sgl->max))
		return IB_WC_LOC_LEN_ERR;
	for (i = 0; i < num; i++) {
		struct srnic_mr *mr;

		if (!sge[i].length)
			continue;
		mr = srnic_mr_lookup(sdev, sge[i].lkey, SRNIC_LKEY, pd, access,
				     sge[i].addr, sge[i].length);
		if (IS_ERR(mr)) {
			srnic_sgl_put(sgl);
			return IB_WC_LOC_PROT_ERR;
		}
		sgl->seg[sgl->num++] = (struct srnic_seg) {
			.mr = mr, .iova = sge[i].addr, .len = sge[i].length,
		};
		sgl->len += sge[i].length;
	}
	if (sgl->len > SRNIC_MAX_MSG_SIZE) {
		srnic_sgl_put(sgl);
		return IB_WC_LOC_LEN_ERR;
	}
	return IB_WC_SUCCESS;
}

/*
 * Copy @len bytes from one piece to another; both were bounds-checked.
 * Fails only for an ODP MR page the process does not have (-EFAULT).
 */
static int srnic_seg_copy(const struct srnic_seg *dst, u64 doff,
			  const struct srnic_seg *src, u64 soff, u32 len)
{
	if (src->mr && dst->mr)
		return srnic_mr_copy(dst->mr, dst->iova + doff, src->mr,
				     src->iova + soff, len);
	if (dst->mr)
		return srnic_mr_copy_to(dst->mr, dst->iova + doff,
					src->buf + soff, len);
	if (src->mr)
		return srnic_mr_copy_from(src->mr, src->iova + soff,
					  (u8 *)dst->buf + doff, len);
	memcpy((u8 *)dst->buf + doff, src->buf + soff, len);
	return 0;
}

/*
 * Copy all of @src into the start of @dst, which must be large enough.
 * Returns 0, or the errno of a failed ODP fault (the copy stops there).
 */
int srnic_sgl_copy(const struct srnic_sgl *dst, const struct srnic_sgl *src)
{
	return srnic_sgl_copy_from(dst, src, 0);
}

/*
 * Copy @src from its byte @from on into the start of @dst, which must be
 * large enough. Returns as srnic_sgl_copy().
 */
int srnic_sgl_copy_from(const struct srnic_sgl *dst,
			const struct srnic_sgl *src, u64 from)
{
	unsigned int d = 0, s = 0;
	u64 doff = 0, soff = from;
	int err;

	while (s < src->num && soff >= src->seg[s].len)
		soff -= src->seg[s++].len;

	while (s < src->num && d < dst->num) {
		u32 n = min_t(u64, src->seg[s].len - soff,
			      dst->seg[d].len - doff);

		err = srnic_seg_copy(&dst->seg[d], doff, &src->seg[s], soff,
				     n);
		if (err)
			return err;
		soff += n;
		doff += n;
		if (soff == src->seg[s].len) {
			s++;
			soff = 0;
		}
		if (doff == dst->seg[d].len) {
			d++;
			doff = 0;
		}
	}
	return 0;
}

/*
 * Copy @len bytes between byte @offset of @sgl and the kernel buffer @buf:
 * into @sgl with @into_sgl, out of it otherwise. The caller checked that
 * @offset + @len fits. Returns 0 or the errno of a failed ODP fault.
 */
int srnic_sgl_xfer(const struct srnic_sgl *sgl, u64 offset, u8 *buf, u32 len,
		   bool into_sgl)
{
	const struct srnic_seg kbuf = { .buf = buf, .len = len };
	unsigned int i;
	u32 done = 0;
	int err;

	for (i = 0; i < sgl->num && done < len; i++) {
		const struct srnic_seg *seg = &sgl->seg[i];
		u32 n;

		if (offset >= seg->len) {
			offset -= seg->len;
			continue;
		}
		n = min_t(u64, seg->len - offset, len - done);
		if (into_sgl)
			err = srnic_seg_copy(seg, offset, &kbuf, done, n);
		else
			err = srnic_seg_copy(&kbuf, done, seg, offset, n);
		if (err)
			return err;
		done += n;
		offset = 0;
	}
	return 0;
}

/**
 * srnic_sgl_scatter() - copy received payload into an SGL
 * @sgl: the destination (a receive WQE's, or a READ's local buffers),
 *	 resolved and bounds-checked
 * @offset: byte offset in @sgl of the first byte
 * @src: the payload
 * @len: its bytes; the caller checked that @offset + @len fits
 *
 * Return: 0, or the errno of a failed ODP fault (-EFAULT: the process has
 * no page behind an ODP MR there); the caller treats it as a local
 * protection error.
 */
int srnic_sgl_scatter(const struct srnic_sgl *sgl, u64 offset, const u8 *src,
		      u32 len)
{
	return srnic_sgl_xfer(sgl, offset, (u8 *)src, len, true);
}

/* Where a received packet's payload goes: an SGL, or an MR. */
struct srnic_pkt_sink {
	const struct srnic_sgl *sgl;
	struct srnic_mr *mr;
	u64 offset;		/* in @sgl, or the iova in @mr */
};

/* Copy @len bytes at @buf to @sink, @off bytes into the payload. */
static int srnic_pkt_sink_put(const struct srnic_pkt_sink *sink, u32 off,
			      const u8 *buf, u32 len)
{
	if (sink->sgl)
		return srnic_sgl_scatter(sink->sgl, sink->offset + off, buf,
					 len);
	return srnic_mr_copy_to(sink->mr, sink->offset + off, buf, len);
}

/*
 * Copy the payload of the received packet @skb (parsed into @pkt: its
 * headers linear at skb->data) to @sink, contiguous piece by piece. A
 * packet need not be linear: one srnic sent carries its payload as
 * fragments of the sender's pages (srnic_tx_attach()), which a veth or
 * local delivery hands over as they are, as NICs with paged receive
 * buffers do (srnic_rx_enqueue() linearises only frag lists); a linear
 * packet is one piece. Returns 0, the copy's errno (a failed ODP fault),
 * or -EFAULT if the payload is not all there (the validated lengths rule
 * that out).
 */
static int srnic_pkt_copy_out(const struct sk_buff *skb,
			      const struct srnic_pkt *pkt,
			      const struct srnic_pkt_sink *sink)
{
	unsigned int headlen = skb_headlen(skb), i;
	u32 at = pkt->hdr_len, len = pkt->payload_len, done = 0, pos;
	int err;

	if (at < headlen) {
		done = min(headlen - at, len);
		err = srnic_pkt_sink_put(sink, 0, skb->data + at, done);
		if (err)
			return err;
	}
	pos = headlen;
	for (i = 0; i < skb_shinfo(skb)->nr_frags && done < len; i++) {
		const skb_frag_t *frag = &skb_shinfo(skb)->frags[i];
		u32 size = skb_frag_size(frag), start, n;

		if (at + done < pos + size) {
			start = at + done - pos;
			n = min(size - start, len - done);
			err = srnic_pkt_sink_put(sink, done,
						 (const u8 *)skb_frag_address(frag) +
						 start, n);
			if (err)
				return err;
			done += n;
		}
		pos += size;
	}
	return done == len ? 0 : -EFAULT;
}

/**
 * srnic_pkt_scatter() - copy a received packet's payload into an SGL
 * @skb: the packet, skb->data at the BTH
 * @pkt: its parsed headers
 * @sgl: the destination, resolved; the caller checked that @offset plus
 *	 the payload fits
 * @offset: byte offset in @sgl of the payload's first byte
 *
 * Return: as srnic_sgl_scatter().
 */
int srnic_pkt_scatter(const struct sk_buff *skb, const struct srnic_pkt *pkt,
		      const struct srnic_sgl *sgl, u64 offset)
{
	const struct srnic_pkt_sink sink = { .sgl = sgl, .offset = offset };

	return srnic_pkt_copy_out(skb, pkt, &sink);
}

/**
 * srnic_pkt_copy_to_mr() - copy a received packet's payload into an MR
 * @skb: the packet, skb->data at the BTH
 * @pkt: its parsed headers
 * @mr: the destination MR, referenced, bounds and access checked
 * @iova: where the payload's first byte goes
 *
 * Return: as srnic_mr_copy_to().
 */
int srnic_pkt_copy_to_mr(const struct sk_buff *skb,
			 const struct srnic_pkt *pkt, struct srnic_mr *mr,
			 u64 iova)
{
	const struct srnic_pkt_sink sink = { .mr = mr, .offset = iova };

	return srnic_pkt_copy_out(skb, pkt, &sink);
}
