// SPDX-License-Identifier: GPL-2.0
/*
 * kablab_churn: test module for the module-bpf-churn workload.
 *
 * It allocates nothing; it only has to be big, so that every load maps
 * several pages of text, rodata and data in the module area: 1024
 * generated functions (~64 KiB of text), a 64 KiB rodata table and a
 * 32 KiB data array. init() touches all of it and prints a checksum.
 */
#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

static uint seed = 1;
module_param(seed, uint, 0444);
MODULE_PARM_DESC(seed, "mixed into the checksum printed at init");

#define KC_FN(n)							\
static noinline u32 kc_fn_##n(u32 x)					\
{									\
	x ^= x << 13; x ^= x >> 17; x ^= x << 5;			\
	x = x * (2654435761u + 0x##n##u) + 0x##n##u;			\
	if (x & 1)							\
		x = (x >> 3) ^ (0x9e3779b9u - 0x##n##u);		\
	else								\
		x = (x << 7) + (0x85ebca6bu ^ 0x##n##u);		\
	return x ^ (x >> 16);						\
}
#define KC_X4(n)	KC_FN(n##0) KC_FN(n##1) KC_FN(n##2) KC_FN(n##3)
#define KC_X16(n)	KC_X4(n##0) KC_X4(n##1) KC_X4(n##2) KC_X4(n##3)
#define KC_X64(n)	KC_X16(n##0) KC_X16(n##1) KC_X16(n##2) KC_X16(n##3)
#define KC_X256(n)	KC_X64(n##0) KC_X64(n##1) KC_X64(n##2) KC_X64(n##3)
KC_X256(10) KC_X256(11) KC_X256(12) KC_X256(13)

#define KC_P(n)		kc_fn_##n,
#define KC_P4(n)	KC_P(n##0) KC_P(n##1) KC_P(n##2) KC_P(n##3)
#define KC_P16(n)	KC_P4(n##0) KC_P4(n##1) KC_P4(n##2) KC_P4(n##3)
#define KC_P64(n)	KC_P16(n##0) KC_P16(n##1) KC_P16(n##2) KC_P16(n##3)
#define KC_P256(n)	KC_P64(n##0) KC_P64(n##1) KC_P64(n##2) KC_P64(n##3)
static u32 (*const kc_fns[])(u32) = {
	KC_P256(10) KC_P256(11) KC_P256(12) KC_P256(13)
};

static const u8 kc_rodata[64 * 1024] = { [0 ... 64 * 1024 - 1] = 0xa5 };
static u8 kc_data[32 * 1024] = { [0 ... 32 * 1024 - 1] = 0x5a };

static int __init kablab_churn_init(void)
{
	u32 sum = seed;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(kc_fns); i++)
		sum = kc_fns[i](sum);
	for (i = 0; i < sizeof(kc_rodata); i += PAGE_SIZE / 4)
		sum += kc_rodata[i];
	for (i = 0; i < sizeof(kc_data); i += PAGE_SIZE / 4)
		sum += kc_data[i]++;
	pr_info("kablab_churn: init seed=%u functions=%zu checksum=%08x\n",
		seed, ARRAY_SIZE(kc_fns), sum);
	return 0;
}

static void __exit kablab_churn_exit(void)
{
	pr_info("kablab_churn: exit\n");
}

module_init(kablab_churn_init);
module_exit(kablab_churn_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kablab: large do-nothing module for module load/unload churn");
