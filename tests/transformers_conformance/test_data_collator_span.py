# Copyright 2020 The HuggingFace Team. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""
Tests for data collators.

Tests are organized by collator type, with each test class containing:
- Functionality tests (PyTorch and NumPy variants)
- Immutability tests (verifying inputs are not mutated)
"""

# Origin: transformers' tests/trainer/test_data_collator.py (huggingface/transformers, the 5.x version, organised
# by collator type), Apache-2.0 (above). Kept: the test mixin and the classes that test
# DataCollatorForLanguageModeling (masked and causal LM, whole-word masking, next-sentence and sentence-order
# batches); the classes of the other collators are left out. Changed, and nothing else:
# - DataCollatorForLanguageModeling and DataCollatorForWholeWordMask are renamed DataCollatorForSpanMasking,
#   imported from spanroberta;
# - the vocabulary fixture covers the ids the tests use (0-999), since DataCollatorForSpanMasking refuses ids
#   outside the vocabulary; every other id continues a word ("##"), so span masking has words of two tokens;
# - every test class runs with the collator's default masking (span) and again with masking="token" (the
#   `*TokenMasking` classes at the end);
# - the two tests of transformers' private helpers (`_calc_word_ids_and_prob_mask`, `_whole_word_mask`) skip.

import copy
import functools
import os
import shutil
import sys
import tempfile
import unittest
from unittest import mock

import numpy as np

from spanroberta import DataCollatorForSpanMasking
from transformers import (
    BertTokenizer,
    BertTokenizerFast,
    is_torch_available,
    set_seed,
)
from transformers.testing_utils import require_torch


if is_torch_available():
    import torch


class DataCollatorTestMixin:
    """Mixin providing common setup and utility methods for data collator tests."""

    def setUp(self):
        self.tmpdirname = tempfile.mkdtemp()
        vocab_tokens = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
        vocab_tokens += [("##" if i % 2 == 0 else "") + f"w{i}" for i in range(len(vocab_tokens), 1000)]
        self.vocab_file = os.path.join(self.tmpdirname, "vocab.txt")
        with open(self.vocab_file, "w", encoding="utf-8") as vocab_writer:
            vocab_writer.write("".join([x + "\n" for x in vocab_tokens]))

    def tearDown(self):
        shutil.rmtree(self.tmpdirname)

    def _check_immutability(self, collator, features):
        """Verify that collator does not mutate input data."""
        original = copy.deepcopy(features)
        collator(features)

        for orig, feat in zip(original, features):
            for key in orig:
                orig_val, feat_val = orig[key], feat[key]
                if isinstance(orig_val, np.ndarray):
                    self.assertEqual(orig_val.tolist(), feat_val.tolist())
                elif is_torch_available() and isinstance(orig_val, torch.Tensor):
                    self.assertEqual(orig_val.tolist(), feat_val.tolist())
                else:
                    self.assertEqual(orig_val, feat_val)


# =============================================================================
# DataCollatorForLanguageModeling tests
# =============================================================================


@require_torch
class TestDataCollatorForLanguageModeling(DataCollatorTestMixin, unittest.TestCase):
    """
    Tests for DataCollatorForLanguageModeling.

    This collator supports both Masked Language Modeling (MLM) and Causal Language
    Modeling (CLM). For MLM, it randomly masks tokens; for CLM, it shifts labels.
    """

    def test_clm_mode(self):
        """Test CLM mode (no masking)."""
        tokenizer = BertTokenizer(self.vocab_file)
        features = [{"input_ids": list(range(10))}, {"input_ids": list(range(10))}]

        collator = DataCollatorForSpanMasking(tokenizer, mlm=False)
        batch = collator(features)

        self.assertEqual(batch["input_ids"].shape, torch.Size([2, 10]))
        self.assertEqual(batch["labels"].shape, torch.Size([2, 10]))

    def test_clm_with_padding(self):
        """Test CLM mode with different length sequences."""
        tokenizer = BertTokenizer(self.vocab_file)
        features = [{"input_ids": list(range(5))}, {"input_ids": list(range(10))}]

        collator = DataCollatorForSpanMasking(tokenizer, mlm=False)
        batch = collator(features)

        self.assertEqual(batch["input_ids"].shape, torch.Size([2, 10]))

    def test_clm_pad_to_multiple_of(self):
        """Test CLM with pad_to_multiple_of."""
        tokenizer = BertTokenizer(self.vocab_file)
        features = [{"input_ids": list(range(10))}, {"input_ids": list(range(10))}]

        collator = DataCollatorForSpanMasking(tokenizer, mlm=False, pad_to_multiple_of=8)
        batch = collator(features)

        self.assertEqual(batch["input_ids"].shape, torch.Size([2, 16]))

    def test_mlm_mode(self):
        """Test MLM mode with masking."""
        set_seed(42)
        tokenizer = BertTokenizer(self.vocab_file)
        features = [{"input_ids": list(range(10))}, {"input_ids": list(range(10))}]

        collator = DataCollatorForSpanMasking(tokenizer, mlm=True)
        batch = collator(features)

        self.assertEqual(batch["input_ids"].shape, torch.Size([2, 10]))
        self.assertEqual(batch["labels"].shape, torch.Size([2, 10]))

        # Check that masking occurred and non-masked tokens have -100 labels
        masked_tokens = batch["input_ids"] == tokenizer.mask_token_id
        self.assertTrue(torch.any(masked_tokens))
        self.assertTrue(all(x == -100 for x in batch["labels"][~masked_tokens].tolist()))

    def test_mlm_with_padding(self):
        """Test MLM mode with different-length sequences requiring padding."""
        set_seed(42)
        tokenizer = BertTokenizer(self.vocab_file)
        features = [{"input_ids": list(range(5))}, {"input_ids": list(range(10))}]

        collator = DataCollatorForSpanMasking(tokenizer, mlm=True)
        batch = collator(features)

        self.assertEqual(batch["input_ids"].shape, torch.Size([2, 10]))
        masked_tokens = batch["input_ids"] == tokenizer.mask_token_id
        self.assertTrue(torch.any(masked_tokens))
        self.assertTrue(all(x == -100 for x in batch["labels"][~masked_tokens].tolist()))

    def test_mlm_pad_to_multiple_of(self):
        """Test MLM mode with pad_to_multiple_of."""
        set_seed(42)
        tokenizer = BertTokenizer(self.vocab_file)
        features = [{"input_ids": list(range(10))}, {"input_ids": list(range(10))}]

        collator = DataCollatorForSpanMasking(tokenizer, mlm=True, pad_to_multiple_of=8)
        batch = collator(features)

        self.assertEqual(batch["input_ids"].shape, torch.Size([2, 16]))
        masked_tokens = batch["input_ids"] == tokenizer.mask_token_id
        self.assertTrue(torch.any(masked_tokens))
        self.assertTrue(all(x == -100 for x in batch["labels"][~masked_tokens].tolist()))

    def test_with_raw_list_features(self):
        """Test LM collator with raw list features (not dicts)."""
        tokenizer = BertTokenizer(self.vocab_file)

        # CLM with raw lists
        collator = DataCollatorForSpanMasking(tokenizer, mlm=False)
        features = [list(range(10)), list(range(10))]
        batch = collator(features)
        self.assertEqual(batch["input_ids"].shape, torch.Size([2, 10]))

        # CLM with raw lists requiring padding
        features = [list(range(5)), list(range(10))]
        batch = collator(features)
        self.assertEqual(batch["input_ids"].shape, torch.Size([2, 10]))

    def test_mlm_seed_reproducibility(self):
        """Test that masking is reproducible with seed."""
        tokenizer = BertTokenizer(self.vocab_file)
        features = [{"input_ids": list(range(1000))}, {"input_ids": list(range(1000))}]

        collator1 = DataCollatorForSpanMasking(tokenizer, seed=42)
        batch1 = collator1(features)

        collator2 = DataCollatorForSpanMasking(tokenizer, seed=42)
        batch2 = collator2(features)

        self.assertTrue(torch.all(batch1["input_ids"] == batch2["input_ids"]))
        self.assertTrue(torch.all(batch1["labels"] == batch2["labels"]))

        # Different seed -> different results
        collator3 = DataCollatorForSpanMasking(tokenizer, seed=43)
        batch3 = collator3(features)
        self.assertFalse(torch.all(batch1["input_ids"] == batch3["input_ids"]))

    def test_mlm_multiworker_dataloader(self):
        """Test seed works with multi-worker DataLoader."""
        tokenizer = BertTokenizer(self.vocab_file)
        features = [{"input_ids": list(range(1000))} for _ in range(10)]

        dataloader = torch.utils.data.DataLoader(
            features,
            batch_size=2,
            num_workers=2,
            generator=torch.Generator().manual_seed(42),
            collate_fn=DataCollatorForSpanMasking(tokenizer, seed=42),
        )

        batches = [batch["input_ids"] for batch in dataloader]
        result = torch.stack(batches)
        self.assertEqual(result.shape, torch.Size([5, 2, 1000]))

    def test_missing_pad_token_error(self):
        """Test error when pad token is missing and padding is needed."""
        tokenizer = BertTokenizer(self.vocab_file)
        tokenizer.pad_token = None
        features = [{"input_ids": list(range(5))}, {"input_ids": list(range(10))}]

        collator = DataCollatorForSpanMasking(tokenizer, mlm=False)
        with self.assertRaises(ValueError):
            collator(features)

    def test_numpy_output(self):
        """Test with NumPy output."""
        tokenizer = BertTokenizer(self.vocab_file)
        features = [{"input_ids": list(range(10))}, {"input_ids": list(range(10))}]

        collator = DataCollatorForSpanMasking(tokenizer, mlm=False, return_tensors="np")
        batch = collator(features)

        self.assertEqual(batch["input_ids"].shape, (2, 10))
        self.assertEqual(batch["labels"].shape, (2, 10))

    def test_numpy_mlm(self):
        """Test MLM mode with NumPy output."""
        set_seed(42)
        tokenizer = BertTokenizer(self.vocab_file)
        features = [{"input_ids": list(range(10))}, {"input_ids": list(range(10))}]

        collator = DataCollatorForSpanMasking(tokenizer, mlm=True, return_tensors="np")
        batch = collator(features)

        masked_tokens = batch["input_ids"] == tokenizer.mask_token_id
        self.assertTrue(np.any(masked_tokens))

    def test_immutability(self):
        """Test that collation does not mutate input data."""
        tokenizer = BertTokenizer(self.vocab_file)
        features = [{"input_ids": list(range(10))}, {"input_ids": list(range(10))}]

        for return_tensors in ["pt", "np"]:
            collator = DataCollatorForSpanMasking(tokenizer, mlm=False, return_tensors=return_tensors)
            self._check_immutability(collator, copy.deepcopy(features))

    # -------------------- Unit tests for internal methods --------------------

    @unittest.skip("tests a private helper of transformers' collator, which DataCollatorForSpanMasking does not have")
    def test_calc_word_ids_and_prob_mask(self):
        """Test word ID assignment and probability mask generation."""
        offsets = np.array(
            [
                [(0, 0), (0, 3), (3, 4), (5, 6), (6, 7), (8, 9)],
                [(0, 0), (0, 3), (3, 4), (5, 6), (6, 7), (0, 0)],
                [(0, 0), (0, 3), (3, 4), (0, 0), (6, 7), (0, 0)],
                [(1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7)],
                [(1, 1), (2, 2), (3, 4), (5, 6), (7, 8), (9, 10)],
                [(0, 0), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0)],
            ]
        )

        special_tokens_mask = np.array(
            [
                [1, 0, 0, 0, 0, 0],
                [1, 0, 0, 0, 0, 1],
                [1, 0, 0, 1, 0, 1],
                [0, 0, 0, 0, 0, 0],
                [0, 0, 0, 0, 0, 0],
                [1, 1, 1, 1, 1, 1],
            ]
        )

        word_ids, prob_mask = DataCollatorForSpanMasking._calc_word_ids_and_prob_mask(
            offsets, special_tokens_mask
        )

        expected_word_ids = np.array(
            [
                [-1, 1, 1, 2, 2, 3],
                [-1, 1, 1, 2, 2, -1],
                [-1, 1, 1, -1, 2, -1],
                [1, 1, 1, 1, 1, 1],
                [1, 2, 3, 4, 5, 6],
                [-1, -1, -1, -1, -1, -1],
            ]
        )

        expected_prob_mask = np.array(
            [
                [1, 0, 1, 0, 1, 0],
                [1, 0, 1, 0, 1, 1],
                [1, 0, 1, 1, 0, 1],
                [0, 1, 1, 1, 1, 1],
                [0, 0, 0, 0, 0, 0],
                [1, 1, 1, 1, 1, 1],
            ]
        )

        np.testing.assert_array_equal(word_ids, expected_word_ids)
        np.testing.assert_array_equal(prob_mask, expected_prob_mask)

    @unittest.skip("tests a private helper of transformers' collator, which DataCollatorForSpanMasking does not have")
    def test_whole_word_mask_internal(self):
        """Test mask expansion to cover all subword tokens of masked words."""
        word_ids = np.array(
            [
                [-1, 1, 1, 2, 2, 3],
                [-1, 1, 1, 2, 2, -1],
                [-1, 1, 1, -1, 2, -1],
                [1, 1, 1, 1, 1, 1],
                [1, 2, 3, 4, 5, 6],
                [1, 2, 3, 4, 5, 6],
                [-1, -1, -1, -1, -1, -1],
            ]
        )

        mask = np.array(
            [
                [0, 1, 0, 0, 0, 0],
                [0, 1, 0, 1, 0, 0],
                [0, 0, 0, 0, 1, 0],
                [1, 0, 0, 0, 0, 0],
                [0, 0, 0, 0, 0, 0],
                [0, 1, 0, 1, 0, 1],
                [0, 0, 0, 0, 0, 0],
            ]
        ).astype(bool)

        output = DataCollatorForSpanMasking._whole_word_mask(word_ids, mask)

        expected = np.array(
            [
                [0, 1, 1, 0, 0, 0],
                [0, 1, 1, 1, 1, 0],
                [0, 0, 0, 0, 1, 0],
                [1, 1, 1, 1, 1, 1],
                [0, 0, 0, 0, 0, 0],
                [0, 1, 0, 1, 0, 1],
                [0, 0, 0, 0, 0, 0],
            ]
        ).astype(bool)

        np.testing.assert_array_equal(output, expected)


# =============================================================================
# DataCollatorForWholeWordMask tests
# =============================================================================


@require_torch
class TestDataCollatorForWholeWordMask(DataCollatorTestMixin, unittest.TestCase):
    """
    Tests for DataCollatorForWholeWordMask.

    This collator extends MLM to ensure that when a token is masked, all other
    tokens from the same word are also masked (whole word masking).
    """

    def _get_tokenizer_and_features(self):
        tokenizer = BertTokenizerFast(self.vocab_file)
        input_tokens = [f"token_{i}" for i in range(8)]
        tokenizer.add_tokens(input_tokens)
        features = [tokenizer(" ".join(input_tokens), return_offsets_mapping=True) for _ in range(2)]
        return tokenizer, features

    def test_basic(self):
        """Test whole word masking masks complete words."""
        tokenizer, features = self._get_tokenizer_and_features()
        collator = DataCollatorForSpanMasking(tokenizer, return_tensors="pt")
        batch = collator(features)

        self.assertEqual(batch["input_ids"].shape, (2, 10))
        self.assertEqual(batch["labels"].shape, (2, 10))

    def test_with_numpy_inputs(self):
        """Test with numpy array inputs."""
        tokenizer, _ = self._get_tokenizer_and_features()
        input_tokens = [f"token_{i}" for i in range(8)]
        features = [
            tokenizer(" ".join(input_tokens), return_offsets_mapping=True).convert_to_tensors("np") for _ in range(2)
        ]

        collator = DataCollatorForSpanMasking(tokenizer, return_tensors="pt")
        batch = collator(features)

        self.assertEqual(batch["input_ids"].shape, torch.Size((2, 10)))

    def test_with_tensor_inputs(self):
        """Test with PyTorch tensor inputs."""
        tokenizer, _ = self._get_tokenizer_and_features()
        input_tokens = [f"token_{i}" for i in range(8)]
        features = [
            tokenizer(" ".join(input_tokens), return_offsets_mapping=True).convert_to_tensors("pt") for _ in range(2)
        ]

        collator = DataCollatorForSpanMasking(tokenizer, return_tensors="pt")
        batch = collator(features)

        self.assertEqual(batch["input_ids"].shape, torch.Size((2, 10)))

    def test_seed_reproducibility(self):
        """Test reproducibility with seed."""
        tokenizer = BertTokenizerFast(self.vocab_file)
        input_tokens = [f"token_{i}" for i in range(998)]
        tokenizer.add_tokens(input_tokens)
        features = [tokenizer(" ".join(input_tokens), return_offsets_mapping=True) for _ in range(2)]

        collator1 = DataCollatorForSpanMasking(tokenizer, seed=42, return_tensors="np")
        batch1 = collator1(features)

        collator2 = DataCollatorForSpanMasking(tokenizer, seed=42, return_tensors="np")
        batch2 = collator2(features)

        np.testing.assert_array_equal(batch1["input_ids"], batch2["input_ids"])

        # Different seed -> different results
        collator3 = DataCollatorForSpanMasking(tokenizer, seed=43, return_tensors="np")
        batch3 = collator3(features)
        self.assertFalse(np.all(batch1["input_ids"] == batch3["input_ids"]))

    def test_seed_multiworker_dataloader(self):
        """Test seed reproducibility with multi-worker DataLoader."""
        tokenizer = BertTokenizerFast(self.vocab_file)
        input_tokens = [f"token_{i}" for i in range(998)]
        tokenizer.add_tokens(input_tokens)
        features = [tokenizer(" ".join(input_tokens), return_offsets_mapping=True) for _ in range(10)]

        dataloader1 = torch.utils.data.DataLoader(
            features,
            batch_size=2,
            num_workers=2,
            generator=torch.Generator().manual_seed(42),
            collate_fn=DataCollatorForSpanMasking(tokenizer, seed=42),
        )
        batches1 = torch.stack([batch["input_ids"] for batch in dataloader1])

        dataloader2 = torch.utils.data.DataLoader(
            features,
            batch_size=2,
            num_workers=2,
            collate_fn=DataCollatorForSpanMasking(tokenizer, seed=42),
        )
        batches2 = torch.stack([batch["input_ids"] for batch in dataloader2])

        self.assertTrue(torch.all(batches1 == batches2))

        # Different seed -> different results
        dataloader3 = torch.utils.data.DataLoader(
            features,
            batch_size=2,
            num_workers=2,
            collate_fn=DataCollatorForSpanMasking(tokenizer, seed=43),
        )
        batches3 = torch.stack([batch["input_ids"] for batch in dataloader3])
        self.assertFalse(torch.all(batches1 == batches3))

    def test_numpy_output(self):
        """Test with NumPy output."""
        tokenizer, features = self._get_tokenizer_and_features()
        collator = DataCollatorForSpanMasking(tokenizer, return_tensors="np")
        batch = collator(features)

        self.assertEqual(batch["input_ids"].shape, (2, 10))
        self.assertEqual(batch["labels"].shape, (2, 10))

    def test_immutability(self):
        """Test that collation does not mutate input data."""
        tokenizer, features = self._get_tokenizer_and_features()
        features = [dict(f) for f in features]

        for return_tensors in ["pt", "np"]:
            collator = DataCollatorForSpanMasking(tokenizer, return_tensors=return_tensors)
            self._check_immutability(collator, copy.deepcopy(features))


# =============================================================================
# Next Sentence Prediction tests
# =============================================================================


@require_torch
class TestNextSentencePrediction(DataCollatorTestMixin, unittest.TestCase):
    """
    Tests for Next Sentence Prediction (NSP) with DataCollatorForLanguageModeling.

    NSP is used in BERT pretraining where the model predicts if two sentences
    follow each other in the original text.
    """

    def _get_features(self):
        return [
            {"input_ids": [0, 1, 2, 3, 4], "token_type_ids": [0, 1, 2, 3, 4], "next_sentence_label": i}
            for i in range(2)
        ]

    def test_nsp(self):
        """Test NSP labels are preserved during collation."""
        tokenizer = BertTokenizer(self.vocab_file)
        collator = DataCollatorForSpanMasking(tokenizer)
        batch = collator(self._get_features())

        self.assertEqual(batch["input_ids"].shape, torch.Size([2, 5]))
        self.assertEqual(batch["token_type_ids"].shape, torch.Size([2, 5]))
        self.assertEqual(batch["labels"].shape, torch.Size([2, 5]))
        self.assertEqual(batch["next_sentence_label"].shape, torch.Size([2]))

    def test_nsp_with_padding(self):
        """Test NSP with pad_to_multiple_of."""
        tokenizer = BertTokenizer(self.vocab_file)
        collator = DataCollatorForSpanMasking(tokenizer, pad_to_multiple_of=8)
        batch = collator(self._get_features())

        self.assertEqual(batch["input_ids"].shape, torch.Size([2, 8]))
        self.assertEqual(batch["next_sentence_label"].shape, torch.Size([2]))

    def test_numpy_output(self):
        """Test NSP with NumPy output."""
        tokenizer = BertTokenizer(self.vocab_file)
        collator = DataCollatorForSpanMasking(tokenizer, return_tensors="np")
        batch = collator(self._get_features())

        self.assertEqual(batch["input_ids"].shape, (2, 5))
        self.assertEqual(batch["next_sentence_label"].shape, (2,))

    def test_immutability(self):
        """Test that NSP collation does not mutate input data."""
        tokenizer = BertTokenizer(self.vocab_file)

        for return_tensors in ["pt", "np"]:
            collator = DataCollatorForSpanMasking(tokenizer, return_tensors=return_tensors)
            self._check_immutability(collator, self._get_features())


# =============================================================================
# Sentence Order Prediction tests
# =============================================================================


@require_torch
class TestSentenceOrderPrediction(DataCollatorTestMixin, unittest.TestCase):
    """
    Tests for Sentence Order Prediction (SOP) with DataCollatorForLanguageModeling.

    SOP is used in ALBERT pretraining where the model predicts if two sentences
    are in the correct order.
    """

    def _get_features(self):
        return [
            {"input_ids": [0, 1, 2, 3, 4], "token_type_ids": [0, 1, 2, 3, 4], "sentence_order_label": i}
            for i in range(2)
        ]

    def test_sop(self):
        """Test SOP labels are preserved during collation."""
        tokenizer = BertTokenizer(self.vocab_file)
        collator = DataCollatorForSpanMasking(tokenizer)
        batch = collator(self._get_features())

        self.assertEqual(batch["input_ids"].shape, torch.Size([2, 5]))
        self.assertEqual(batch["token_type_ids"].shape, torch.Size([2, 5]))
        self.assertEqual(batch["labels"].shape, torch.Size([2, 5]))
        self.assertEqual(batch["sentence_order_label"].shape, torch.Size([2]))

    def test_sop_with_tensor_inputs(self):
        """Test SOP with PyTorch tensor inputs."""
        tokenizer = BertTokenizer(self.vocab_file)
        features = [
            {
                "input_ids": torch.tensor([0, 1, 2, 3, 4]),
                "token_type_ids": torch.tensor([0, 1, 2, 3, 4]),
                "sentence_order_label": i,
            }
            for i in range(2)
        ]

        collator = DataCollatorForSpanMasking(tokenizer)
        batch = collator(features)

        self.assertEqual(batch["sentence_order_label"].shape, torch.Size([2]))

    def test_sop_with_padding(self):
        """Test SOP with pad_to_multiple_of."""
        tokenizer = BertTokenizer(self.vocab_file)
        features = [
            {
                "input_ids": torch.tensor([0, 1, 2, 3, 4]),
                "token_type_ids": torch.tensor([0, 1, 2, 3, 4]),
                "sentence_order_label": i,
            }
            for i in range(2)
        ]

        collator = DataCollatorForSpanMasking(tokenizer, pad_to_multiple_of=8)
        batch = collator(features)

        self.assertEqual(batch["input_ids"].shape, torch.Size([2, 8]))
        self.assertEqual(batch["sentence_order_label"].shape, torch.Size([2]))

    def test_numpy_output(self):
        """Test SOP with NumPy output."""
        tokenizer = BertTokenizer(self.vocab_file)
        collator = DataCollatorForSpanMasking(tokenizer, return_tensors="np")
        batch = collator(self._get_features())

        self.assertEqual(batch["input_ids"].shape, (2, 5))
        self.assertEqual(batch["sentence_order_label"].shape, (2,))

    def test_immutability(self):
        """Test that SOP collation does not mutate input data."""
        tokenizer = BertTokenizer(self.vocab_file)

        for return_tensors in ["pt", "np"]:
            collator = DataCollatorForSpanMasking(tokenizer, return_tensors=return_tensors)
            self._check_immutability(collator, self._get_features())


# Changed (see the top): each test class again, with DataCollatorForSpanMasking(..., masking="token").
def _with_token_masking(test_class):
    def setUp(self):
        test_class.setUp(self)
        token_masking = functools.partial(DataCollatorForSpanMasking, masking="token")
        patcher = mock.patch.object(sys.modules[__name__], "DataCollatorForSpanMasking", token_masking)
        patcher.start()
        self.addCleanup(patcher.stop)

    return type(f"{test_class.__name__}TokenMasking", (test_class,), {"setUp": setUp})


for _test_class in (
    TestDataCollatorForLanguageModeling,
    TestDataCollatorForWholeWordMask,
    TestNextSentencePrediction,
    TestSentenceOrderPrediction,
):
    globals()[f"{_test_class.__name__}TokenMasking"] = _with_token_masking(_test_class)
