// SPDX-License-Identifier: GPL-2.0
/*
 * kablab_pmd_pin: guest-only test module for tests/test_grouped.py.
 *
 * It makes the page allocator's fragmented regime on demand: at load it
 * takes every free block of PMD order (2 MB on x86) that the allocator
 * hands out without reclaim or compaction, keeps the first page of each
 * and frees the other 511. Afterwards no free block of that order is left,
 * while nearly all of the memory is still free, in pieces of at most half
 * a block, and an order-9 allocation goes through the slow path and fails
 * as it would on a long-running machine. What is freed after the scan (the
 * insmod itself, the module's init memory) can make a whole block again:
 * writing to /sys/module/kablab_pmd_pin/parameters/repin scans once more.
 * The pinned pages are freed at unload.
 */
#include <linux/gfp.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/sched.h>

#define PIN_ORDER	(PMD_SHIFT - PAGE_SHIFT)

static LIST_HEAD(pinned);
static unsigned long nr_pinned;

static DEFINE_MUTEX(pin_lock);

static void pin_free_blocks(void)
{
	/* what is free now: no reclaim, no compaction, no kswapd wake-up */
	const gfp_t gfp = (GFP_KERNEL & ~__GFP_RECLAIM) | __GFP_NOWARN;
	unsigned long before = nr_pinned;
	struct page *page;
	unsigned int i;

	mutex_lock(&pin_lock);
	while ((page = alloc_pages(gfp, PIN_ORDER))) {
		split_page(page, PIN_ORDER);
		for (i = 1; i < (1U << PIN_ORDER); i++)
			__free_page(page + i);
		list_add(&page->lru, &pinned);
		nr_pinned++;
		cond_resched();
	}
	pr_info("kablab_pmd_pin: pinned %lu blocks of order %u (%lu in all)\n",
		nr_pinned - before, PIN_ORDER, nr_pinned);
	mutex_unlock(&pin_lock);
}

static int repin_set(const char *val, const struct kernel_param *kp)
{
	pin_free_blocks();
	return 0;
}

static const struct kernel_param_ops repin_ops = {
	.set = repin_set,
};
module_param_cb(repin, &repin_ops, NULL, 0200);
MODULE_PARM_DESC(repin, "write anything: pin the 2 MB blocks freed since the last scan");

static int __init kablab_pmd_pin_init(void)
{
	pin_free_blocks();
	return 0;
}

static void __exit kablab_pmd_pin_exit(void)
{
	struct page *page, *next;

	list_for_each_entry_safe(page, next, &pinned, lru) {
		list_del(&page->lru);
		__free_page(page);
	}
	pr_info("kablab_pmd_pin: unpinned %lu blocks\n", nr_pinned);
}

module_init(kablab_pmd_pin_init);
module_exit(kablab_pmd_pin_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kablab test: pin one page of every free PMD sized block");
